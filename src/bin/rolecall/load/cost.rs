//! What a scenario cost the machine: CPU per event of the server and of
//! PostgreSQL, and the statements per event the server sent the database.

use serde::Serialize;

use crate::load::cpu::{self, CpuPerEvent, CpuSample};
use crate::load::postgres::{self, Snapshot, Statements};
use crate::load::stats::table;

/// What to measure: the server the tool started, and its database.
pub struct Meter {
    /// The servers' process ids, when the tool started them.
    pub servers: Vec<u32>,
    /// The run's PostgreSQL database, with `--backend postgres`.
    pub database: Option<String>,
}

/// The readings a scenario starts from.
pub struct Start {
    cpu: Option<CpuSample>,
    statements: Option<Result<Snapshot, String>>,
}

/// What a scenario cost, per event.
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// CPU per event (only for a server the tool started).
    pub cpu_per_event: Option<CpuPerEvent>,
    /// Statements the server sent the database (with `--backend postgres`
    /// and `pg_stat_statements` loaded).
    pub statements: Option<Statements>,
    /// Why statements were not counted, when they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statements_unavailable: Option<String>,
}

impl Meter {
    /// Reads where a scenario starts.
    pub async fn start(&self) -> Start {
        let statements = match &self.database {
            Some(url) => Some(postgres::snapshot(url).await),
            None => None,
        };
        Start {
            cpu: (!self.servers.is_empty()).then(|| cpu::sample(&self.servers)),
            statements,
        }
    }

    /// What `events` events cost since `start`.
    pub async fn finish(&self, start: Start, events: u64) -> Cost {
        let cpu_per_event = start
            .cpu
            .map(|before| cpu::per_event(before, cpu::sample(&self.servers), events));
        let (statements, statements_unavailable) = match (&self.database, start.statements) {
            (Some(url), Some(Ok(before))) => match postgres::snapshot(url).await {
                Ok(after) => (
                    Some(postgres::statements_between(&before, &after, events)),
                    None,
                ),
                Err(why) => (None, Some(why)),
            },
            (_, Some(Err(why))) => (None, Some(why)),
            _ => (None, None),
        };
        Cost {
            cpu_per_event,
            statements,
            statements_unavailable,
        }
    }
}

/// Prints `cost` under `title`.
pub fn print(title: &str, cost: &Cost) {
    let mut rows = Vec::new();
    if let Some(cpu) = &cost.cpu_per_event {
        rows.push((
            "rolecall CPU per event (µs)",
            format!("{:.0}", cpu.server_us),
        ));
        if let Some(us) = cpu.postgres_us {
            rows.push(("PostgreSQL CPU per event (µs)", format!("{us:.0}")));
        }
    }
    if let Some(statements) = &cost.statements {
        rows.push((
            "statements per event",
            format!("{:.2} ({} in all)", statements.per_event, statements.total),
        ));
        rows.push((
            "WAL bytes per event",
            format!("{:.0}", statements.wal_bytes_per_event),
        ));
    }
    if let Some(why) = &cost.statements_unavailable {
        rows.push(("statements per event", format!("not counted: {why}")));
    }
    if rows.is_empty() {
        return;
    }
    table(title, &rows);
    if let Some(statements) = &cost.statements {
        println!("  per event: calls, exec µs, WAL bytes; statement");
        for statement in statements.by_statement.iter().take(12) {
            println!(
                "  {:>8.3} {:>7.1} {:>7.0}  {}",
                statement.per_event,
                statement.exec_us_per_event,
                statement.wal_bytes_per_event,
                statement.query
            );
        }
    }
}
