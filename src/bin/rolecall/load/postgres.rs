//! `rolecall load --backend postgres`: a new database for each run on a
//! PostgreSQL server on loopback (dropped after it), and the statements the
//! server sends it, counted with `pg_stat_statements` when the server has
//! it loaded.

use std::collections::HashMap;

use rolecall::storage::postgres::with_database;
use serde::Serialize;
use tokio_postgres::{Client, NoTls};

/// A database made for one run; dropped (with its connections) on
/// [`RunDatabase::drop_now`].
pub struct RunDatabase {
    admin_url: String,
    name: String,
    /// The URL of the new database, for the server.
    pub url: String,
}

impl RunDatabase {
    /// Makes a new database on the server `admin_url` names (a role that
    /// may create databases; loopback only, without TLS: this is a
    /// benchmark beside the tool, never a remote database).
    pub async fn create(admin_url: &str) -> Result<Self, String> {
        check_loopback(admin_url)?;
        let name = format!("rolecall_load_{}", rolecall::ids::new_v7().simple());
        execute(admin_url, &format!("CREATE DATABASE {name}")).await?;
        Ok(RunDatabase {
            admin_url: admin_url.to_owned(),
            url: with_database(admin_url, &name),
            name,
        })
    }

    /// Drops the database; tries again a few times while sessions of the
    /// servers just stopped are still closing.
    pub async fn drop_now(self) -> Result<(), String> {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let mut tries = 0;
        loop {
            match execute(&self.admin_url, &sql).await {
                Err(_) if tries < 10 => {
                    tries += 1;
                    actix_web::rt::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                outcome => return outcome,
            }
        }
    }
}

/// Statements of one kind, by how many a burst sent.
#[derive(Clone, Debug, Serialize)]
pub struct StatementCount {
    /// Executions during the burst.
    pub calls: i64,
    /// Executions per event.
    pub per_event: f64,
    /// Time PostgreSQL spent executing them, in µs per event.
    pub exec_us_per_event: f64,
    /// WAL they wrote, in bytes per event.
    pub wal_bytes_per_event: f64,
    /// The statement, as PostgreSQL normalizes it (shortened).
    pub query: String,
}

/// What the server sent the database during a burst.
#[derive(Clone, Debug, Serialize)]
pub struct Statements {
    /// Every statement executed (BEGIN and COMMIT included).
    pub total: i64,
    /// Statements per event.
    pub per_event: f64,
    /// WAL the server wrote (all of it, whoever wrote it), in bytes per
    /// event.
    pub wal_bytes_per_event: f64,
    /// The statements by kind, most executed first.
    pub by_statement: Vec<StatementCount>,
}

/// Executions so far of each statement of the database, by query id, and
/// where the server's WAL stood.
pub struct Snapshot {
    statements: HashMap<i64, Executed>,
    wal_at: f64,
}

/// What the executions of one statement so far cost.
struct Executed {
    calls: i64,
    exec_ms: f64,
    wal_bytes: f64,
    query: String,
}

/// The statements of the database at `url` so far; `Err` saying why when
/// `pg_stat_statements` cannot be read (not in `shared_preload_libraries`,
/// or the extension not created in the database).
pub async fn snapshot(url: &str) -> Result<Snapshot, String> {
    let client = connect(url).await?;
    let rows = client
        .query(
            "SELECT queryid, calls, total_exec_time, wal_bytes::float8, query \
             FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND queryid IS NOT NULL AND query NOT LIKE '%pg_stat_statements%'",
            &[],
        )
        .await
        .map_err(|err| format!("pg_stat_statements: {err}"))?;
    let mut statements = HashMap::new();
    for row in rows {
        let id: i64 = row.try_get(0).map_err(|e| e.to_string())?;
        let executed = Executed {
            calls: row.try_get(1).map_err(|e| e.to_string())?,
            exec_ms: row.try_get(2).map_err(|e| e.to_string())?,
            wal_bytes: row.try_get(3).map_err(|e| e.to_string())?,
            query: row.try_get(4).unwrap_or_default(),
        };
        statements.insert(id, executed);
    }
    let wal_at: f64 = client
        .query_one(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|err| format!("pg_current_wal_lsn: {err}"))?;
    Ok(Snapshot { statements, wal_at })
}

/// Makes `pg_stat_statements` readable in the new database, if the server
/// loads it (creating the extension needs a superuser, or a template that
/// has it).
pub async fn enable_statements(url: &str) -> Result<(), String> {
    let client = connect(url).await?;
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .map_err(|err| format!("CREATE EXTENSION pg_stat_statements: {err}"))
}

/// What ran between `before` and `after`, per event of `events`.
pub fn statements_between(before: &Snapshot, after: &Snapshot, events: u64) -> Statements {
    let events = events.max(1) as f64;
    let mut by_statement: Vec<StatementCount> = after
        .statements
        .iter()
        .filter_map(|(id, now)| {
            let (calls, exec_ms, wal_bytes) = match before.statements.get(id) {
                Some(then) => (
                    now.calls - then.calls,
                    now.exec_ms - then.exec_ms,
                    now.wal_bytes - then.wal_bytes,
                ),
                None => (now.calls, now.exec_ms, now.wal_bytes),
            };
            (calls > 0).then(|| StatementCount {
                calls,
                per_event: calls as f64 / events,
                exec_us_per_event: exec_ms * 1000.0 / events,
                wal_bytes_per_event: wal_bytes / events,
                query: shortened(&now.query),
            })
        })
        .collect();
    by_statement.sort_by_key(|s| std::cmp::Reverse(s.calls));
    let total = by_statement.iter().map(|s| s.calls).sum::<i64>();
    Statements {
        total,
        per_event: total as f64 / events,
        wal_bytes_per_event: (after.wal_at - before.wal_at) / events,
        by_statement,
    }
}

/// The first 100 characters of a statement, on one line.
fn shortened(query: &str) -> String {
    let line = query.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(100) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

async fn connect(url: &str) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.map_err(|err| {
        format!(
            "connecting to PostgreSQL: {}",
            rolecall::telemetry::cause_chain(&err)
        )
    })?;
    actix_web::rt::spawn(connection);
    Ok(client)
}

async fn execute(url: &str, sql: &str) -> Result<(), String> {
    connect(url)
        .await?
        .batch_execute(sql)
        .await
        .map_err(|err| format!("{sql}: {}", rolecall::telemetry::cause_chain(&err)))
}

/// Refuses a URL whose host is not a loopback address or `localhost`:
/// the load tool sends its traffic to this machine only.
fn check_loopback(url: &str) -> Result<(), String> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| format!("--postgres-url: {e}"))?;
    let loopback = config.get_hosts().iter().all(|host| match host {
        tokio_postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        tokio_postgres::config::Host::Unix(_) => true,
    });
    if loopback && !config.get_hosts().is_empty() {
        Ok(())
    } else {
        Err("--postgres-url must name a PostgreSQL server on this machine (127.0.0.1, ::1 or localhost)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_servers_are_accepted() {
        for url in [
            "postgres://u:p@127.0.0.1:5432/postgres",
            "postgres://u@localhost/postgres",
            "postgres://u@[::1]:5432/postgres",
            "postgres://u@127.0.0.2/postgres",
        ] {
            assert!(check_loopback(url).is_ok(), "{url}");
        }
        for url in [
            "postgres://u@10.0.0.5/postgres",
            "postgres://u@db.internal/postgres",
            "postgres://u@192.168.1.1/postgres",
        ] {
            assert!(check_loopback(url).is_err(), "{url}");
        }
    }

    #[test]
    fn statements_and_wal_are_counted_between_snapshots() {
        let executed = |calls, exec_ms, wal_bytes, query: &str| Executed {
            calls,
            exec_ms,
            wal_bytes,
            query: query.to_owned(),
        };
        let before = Snapshot {
            statements: HashMap::from([(1, executed(10, 1.0, 0.0, "BEGIN"))]),
            wal_at: 1000.0,
        };
        let after = Snapshot {
            statements: HashMap::from([
                (1, executed(30, 2.0, 0.0, "BEGIN")),
                (2, executed(5, 4.0, 7000.0, "INSERT  INTO\n outbox")),
            ]),
            wal_at: 9000.0,
        };
        let counted = statements_between(&before, &after, 10);
        assert_eq!(counted.total, 25);
        assert!((counted.per_event - 2.5).abs() < 1e-9);
        assert!((counted.wal_bytes_per_event - 800.0).abs() < 1e-9);
        assert_eq!(counted.by_statement[0].query, "BEGIN");
        assert!((counted.by_statement[0].exec_us_per_event - 100.0).abs() < 1e-9);
        assert_eq!(counted.by_statement[1].query, "INSERT INTO outbox");
        assert!((counted.by_statement[1].wal_bytes_per_event - 700.0).abs() < 1e-9);
    }
}
