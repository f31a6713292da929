//! CPU time spent by the server under test and by a PostgreSQL server on
//! this machine, read from `/proc` before and after a scenario: what each
//! event costs in CPU, beside what it costs in time.

use std::time::Duration;

use serde::Serialize;

/// CPU time of the processes measured, at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSample {
    /// The rolecall servers (every node of a cluster).
    pub server: Duration,
    /// Every `postgres` process visible (none when the database is elsewhere).
    pub postgres: Option<Duration>,
}

/// CPU per event between two samples, in microseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CpuPerEvent {
    /// The rolecall servers (every node of a cluster, summed).
    pub server_us: f64,
    /// PostgreSQL, when it runs on this machine.
    pub postgres_us: Option<f64>,
}

/// Reads the CPU time of the `servers` processes (summed) and of every
/// `postgres` process.
pub fn sample(servers: &[u32]) -> CpuSample {
    CpuSample {
        server: servers.iter().filter_map(|pid| process_cpu(*pid)).sum(),
        postgres: postgres_cpu(),
    }
}

/// What `events` events cost between `before` and `after`.
pub fn per_event(before: CpuSample, after: CpuSample, events: u64) -> CpuPerEvent {
    let per = |spent: Duration| spent.as_secs_f64() * 1e6 / events.max(1) as f64;
    CpuPerEvent {
        server_us: per(after.server.saturating_sub(before.server)),
        postgres_us: match (before.postgres, after.postgres) {
            (Some(before), Some(after)) => Some(per(after.saturating_sub(before))),
            _ => None,
        },
    }
}

/// User and system time of process `pid` (its threads included).
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_of_stat(&stat)
}

/// Fields 14 and 15 of a `/proc/<pid>/stat` line (user and system time),
/// in clock ticks of 1/100 s (the USER_HZ every Linux exports to user
/// space).
fn cpu_of_stat(stat: &str) -> Option<Duration> {
    ticks_of_stat(stat, 11..=12)
}

/// Fields 14 to 17: the process's own time and that of its children that
/// ended. Summed over PostgreSQL's processes, it counts the work of a
/// backend that ended during the run (its time moves to the postmaster's
/// children fields when it is reaped), and never goes down.
fn cpu_with_children_of_stat(stat: &str) -> Option<Duration> {
    ticks_of_stat(stat, 11..=14)
}

fn ticks_of_stat(stat: &str, fields: std::ops::RangeInclusive<usize>) -> Option<Duration> {
    // The command name, in parentheses, may hold spaces: count after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let all: Vec<&str> = after_name.split_whitespace().collect();
    let mut ticks = 0u64;
    for field in fields {
        ticks += all.get(field)?.parse::<u64>().ok()?;
    }
    Some(Duration::from_millis(ticks * 10))
}

/// The CPU time of every process named `postgres` and of those of their
/// children that ended, summed; `None` when there is none.
fn postgres_cpu() -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let path = entry.path();
        let is_postgres = std::fs::read_to_string(path.join("comm"))
            .is_ok_and(|comm| comm.trim_end() == "postgres");
        if !is_postgres {
            continue;
        }
        if let Some(spent) = std::fs::read_to_string(path.join("stat"))
            .ok()
            .and_then(|stat| cpu_with_children_of_stat(&stat))
        {
            total += spent;
            found = true;
        }
    }
    found.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_system_time_are_read_after_the_command_name() {
        let stat =
            "4242 (rolecall serve) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 30 0 0 20 0 9 0";
        assert_eq!(cpu_of_stat(stat), Some(Duration::from_millis(2_800)));
        assert_eq!(
            cpu_with_children_of_stat(stat),
            Some(Duration::from_millis(2_800)),
            "no children's time"
        );
        let postmaster = "77 (postgres) S 1 77 77 0 -1 4194560 1000 0 0 0 250 30 400 20 20 0 9 0";
        assert_eq!(
            cpu_with_children_of_stat(postmaster),
            Some(Duration::from_millis(7_000))
        );
        assert_eq!(cpu_of_stat("garbage"), None);
    }

    #[test]
    fn cost_per_event_is_the_difference_over_the_events() {
        let before = CpuSample {
            server: Duration::from_secs(1),
            postgres: Some(Duration::from_secs(2)),
        };
        let after = CpuSample {
            server: Duration::from_secs(3),
            postgres: Some(Duration::from_secs(3)),
        };
        let cost = per_event(before, after, 10_000);
        assert!((cost.server_us - 200.0).abs() < 1e-9);
        assert_eq!(cost.postgres_us.map(|us| us.round()), Some(100.0));
    }
}
