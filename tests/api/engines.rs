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
            Ok(url) if !url.trim().is_empty() => Some(Engine::Postgres(Arc::new(Databases {
                admin_url: url,
                made: Mutex::new(HashMap::new()),
            }))),
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
    /// keeps them to look into.
    fn drop(&mut self) {
        if std::env::var("ROLECALL_TEST_KEEP_DATABASES").as_deref() == Ok("1") {
            return;
        }
        let made = self.made.lock().map(|m| m.clone()).unwrap_or_default();
        for name in made.values() {
            let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            // Another test creating or dropping a database at the same
            // moment can make this fail once; a leftover is only untidy.
            let mut tries = 0;
            while let Err(err) = try_admin(&self.admin_url, sql.clone()) {
                tries += 1;
                if tries == 5 {
                    eprintln!("{sql}: {err}; the database is left behind");
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
    }
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
