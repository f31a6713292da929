//! One test body, two storage engines. `on_both_engines!` runs a test on
//! sled and on PostgreSQL; the server helpers read which engine the test
//! runs on, and give every data directory its own fresh database (the same
//! directory, the same database: a restart finds its state, as on sled).
//!
//! PostgreSQL comes from `ROLECALL_TEST_POSTGRES_URL`, a role that may
//! create databases. Without it the PostgreSQL half is skipped, saying so,
//! unless `ROLECALL_REQUIRE_POSTGRES=1` (CI), which makes it a failure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rolecall::storage::postgres::with_database;

/// Which engine the current test runs on.
#[derive(Clone)]
pub enum Engine {
    Sled,
    Postgres(Arc<Databases>),
}

tokio::task_local! {
    static ENGINE: Engine;
}

impl Engine {
    /// PostgreSQL, when the tests have one; `None` (the test is skipped,
    /// with a printed reason) when they do not.
    pub fn postgres(test: &str) -> Option<Engine> {
        match std::env::var("ROLECALL_TEST_POSTGRES_URL") {
            Ok(url) if !url.trim().is_empty() => {
                sweep_old_databases(&url);
                Some(Engine::Postgres(Arc::new(Databases {
                    admin_url: url,
                    made: Mutex::new(HashMap::new()),
                })))
            }
            _ => {
                assert!(
                    std::env::var("ROLECALL_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                    "ROLECALL_REQUIRE_POSTGRES=1 but ROLECALL_TEST_POSTGRES_URL is not set"
                );
                eprintln!(
                    "skipped {test} on PostgreSQL: set ROLECALL_TEST_POSTGRES_URL to a role that may \
                     create databases (see README)"
                );
                None
            }
        }
    }

    /// Runs `test` on this engine.
    pub async fn run<F: std::future::Future>(self, test: F) -> F::Output {
        ENGINE.scope(self, test).await
    }

    /// The engine of the current test (sled outside `on_both_engines!`).
    pub fn current() -> Engine {
        ENGINE.try_with(Engine::clone).unwrap_or(Engine::Sled)
    }

    /// The settings that put a server on `data_dir` on this engine.
    pub fn env_for(&self, data_dir: &Path) -> Vec<(String, String)> {
        match self {
            Engine::Sled => Vec::new(),
            Engine::Postgres(databases) => vec![
                ("ROLECALL_STORAGE__BACKEND".into(), "postgres".into()),
                (
                    "ROLECALL_STORAGE__POSTGRES_URL".into(),
                    databases.url_for(data_dir),
                ),
            ],
        }
    }
}

/// The databases of one test, dropped with it.
pub struct Databases {
    admin_url: String,
    made: Mutex<HashMap<PathBuf, String>>,
}

impl Databases {
    /// The URL of the database of `data_dir`, made on first use.
    pub fn url_for(&self, data_dir: &Path) -> String {
        let mut made = self.made.lock().expect("databases");
        let name = made
            .entry(data_dir.to_owned())
            .or_insert_with(|| {
                let name = format!("rc_test_{}", uuid::Uuid::now_v7().simple());
                admin(&self.admin_url, format!("CREATE DATABASE {name}"));
                name
            })
            .clone();
        with_database(&self.admin_url, &name)
    }
}

impl Drop for Databases {
    /// Drops the test's databases, unless `ROLECALL_TEST_KEEP_DATABASES=1`
    /// keeps them to look into; and tries again those an earlier drop left.
    fn drop(&mut self) {
        if std::env::var("ROLECALL_TEST_KEEP_DATABASES").as_deref() == Ok("1") {
            return;
        }
        let made = self.made.lock().map(|m| m.clone()).unwrap_or_default();
        let mut names: Vec<String> = made.into_values().collect();
        names.extend(
            LEFT_BEHIND
                .lock()
                .map(|mut left| std::mem::take(&mut *left))
                .unwrap_or_default(),
        );
        for name in names {
            if let Err(err) = drop_database(&self.admin_url, &name) {
                eprintln!("DROP DATABASE {name}: {err}; left for a later drop");
                if let Ok(mut left) = LEFT_BEHIND.lock() {
                    left.push(name);
                }
            }
        }
    }
}

/// Databases a drop gave up on, tried again by the next test's drop.
static LEFT_BEHIND: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How long a drop waits. `DROP DATABASE` waits until every backend of
/// the cluster accepts a barrier, and one still authenticating accepts it
/// only at its `authentication_timeout` (60 s): a connection a node of
/// this test opened as the test ended, whose client runs on the runtime
/// that this very drop blocks.
const DROP_WAIT: &str = "5s";

/// Drops the database `name`, or answers why not.
fn drop_database(admin_url: &str, name: &str) -> Result<(), String> {
    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    for tries in 1.. {
        let sql = sql.clone();
        let dropped = on_database(admin_url, |client| async move {
            client
                .batch_execute(&format!("SET statement_timeout = '{DROP_WAIT}'"))
                .await
                .map_err(|err| describe(&err))?;
            client
                .batch_execute(&sql)
                .await
                .map_err(|err| describe(&err))
        });
        match dropped {
            Ok(()) => return Ok(()),
            // Past the wait: trying again at once would wait as long.
            Err(err) if tries == 5 || err.contains("57014") => return Err(err),
            // Another test creating or dropping a database at the same
            // moment can make it fail once.
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
        }
    }
    unreachable!("the loop returns")
}

/// Drops the test databases earlier runs left (made over two hours ago,
/// as their names' UUIDv7 say), once per run.
fn sweep_old_databases(admin_url: &str) {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        let names = on_database(admin_url, |client| async move {
            let rows = client
                .query(
                    "SELECT datname::text FROM pg_database WHERE datname LIKE 'rc\\_test\\_%'",
                    &[],
                )
                .await
                .map_err(|err| describe(&err))?;
            Ok::<_, String>(
                rows.iter()
                    .map(|row| row.get::<_, String>(0))
                    .collect::<Vec<_>>(),
            )
        });
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        for name in names.unwrap_or_default() {
            let made_ms = name
                .strip_prefix("rc_test_")
                .and_then(|id| u128::from_str_radix(id.get(..12)?, 16).ok());
            if made_ms.is_some_and(|made| made + 2 * 3_600_000 < now_ms) {
                let _ = drop_database(admin_url, &name);
            }
        }
    });
}

/// Runs `work` with a client of `url`, on a thread of its own (callers
/// may be sync helpers or inside a runtime), and answers what it answers.
pub fn on_database<T, F>(
    url: &str,
    work: impl FnOnce(tokio_postgres::Client) -> F + Send + 'static,
) -> T
where
    F: std::future::Future<Output = T>,
    T: Send + 'static,
{
    let url = url.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|err| panic!("cannot connect to {url}: {err}"));
            tokio::spawn(connection);
            work(client).await
        })
    })
    .join()
    .expect("the database work ran")
}

/// The server's message and SQLSTATE, or the client's error.
fn describe(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => err.to_string(),
    }
}

/// Runs one statement as the test role.
pub fn admin(url: &str, sql: String) {
    if let Err(err) = try_admin(url, sql.clone()) {
        panic!("{sql}: {err}");
    }
}

/// Runs one statement as the test role: the error, described.
fn try_admin(url: &str, sql: String) -> Result<(), String> {
    on_database(url, |client| async move {
        client
            .batch_execute(&sql)
            .await
            .map_err(|err| describe(&err))
    })
}

/// Runs the test function on both engines: `mod name { fn sled; fn postgres }`.
macro_rules! on_both_engines {
    ($( $(#[$attr:meta])* async fn $name:ident() $body:block )+) => {
        $(
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                $(#[$attr])*
                #[actix_web::test]
                async fn sled() {
                    crate::engines::Engine::Sled.run(async move $body).await
                }

                $(#[$attr])*
                #[actix_web::test]
                async fn postgres() {
                    let test = concat!(module_path!(), "::", stringify!($name));
                    if let Some(engine) = crate::engines::Engine::postgres(test) {
                        engine.run(async move $body).await
                    }
                }
            }
        )+
    };
}
