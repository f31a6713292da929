//! Jobs handed to their organization's lease holder in the notification
//! of the commit that wrote them (migration 9). The committing node marks
//! their rows held under the holder's epoch, with [`HANDED`] as the read
//! that marked them, and the holder takes them into memory from the
//! payload: no read of the outbox, and no update of the rows. A holder
//! that cannot take them at once (no room, older jobs waiting, the
//! notification lost with its connection) reads them later: its reads then
//! take the rows marked [`HANDED`] too, as they take rows whose read's
//! answer was lost.
//!
//! The payload, in text (PostgreSQL's limit is 8,000 bytes):
//! `handed:<organization> <epoch>` then, per job, a line
//! `\n<delivery id> <due ms> <created ms> <event> <body bytes>\n` and the
//! envelope itself.

use std::fmt::Write as _;

use uuid::Uuid;

use crate::domain::delivery::Job;
use crate::ids::{DeliveryId, OrgId};
use crate::time::Timestamp;

/// The `claim_read` of a row handed to the holder in a notification.
pub const HANDED: i64 = -1;

const PREFIX: &str = "handed:";

/// The longest payload sent: under PostgreSQL's 8,000 bytes.
const LONGEST: usize = 7_900;

/// Jobs of one organization handed to its holder.
#[derive(Debug, PartialEq, Eq)]
pub struct Handed {
    /// The organization.
    pub org: OrgId,
    /// The epoch the rows were marked held under.
    pub epoch: i64,
    /// The new jobs, in commit order.
    pub jobs: Vec<Job>,
}

/// Payloads handing new jobs of one organization to its holder, filled in
/// commit order, each within PostgreSQL's limit.
#[derive(Debug)]
pub struct Payloads {
    header: String,
    done: Vec<String>,
    open: String,
}

impl Payloads {
    /// None yet, for `org`'s jobs held under `epoch`.
    pub fn new(org: OrgId, epoch: i64) -> Self {
        let header = format!("{PREFIX}{} {epoch}", org.0);
        Payloads {
            open: header.clone(),
            header,
            done: Vec::new(),
        }
    }

    /// Adds a job's part (see [`Line::of`]).
    pub fn push(&mut self, line: &Line) {
        if self.open.len() + line.0.len() > LONGEST {
            let full = std::mem::replace(&mut self.open, self.header.clone());
            self.done.push(full);
        }
        self.open.push_str(&line.0);
    }

    /// The payloads, or none if no job was added.
    pub fn finish(mut self) -> Vec<String> {
        if self.open.len() > self.header.len() {
            self.done.push(self.open);
        }
        self.done
    }
}

/// One job's part of a payload, which fits in one with any header.
#[derive(Debug)]
pub struct Line(String);

impl Line {
    /// `job`'s part; `None` when it cannot be handed (an envelope too big
    /// for a payload): it is then told of as before.
    pub fn of(job: &Job) -> Option<Line> {
        // The longest header: the prefix, an organization id and an epoch.
        const HEADER: usize = PREFIX.len() + 36 + 1 + 20;
        let body = std::str::from_utf8(&job.body).ok()?;
        if job.event.is_empty() || job.event.contains([' ', '\n']) {
            return None;
        }
        let mut line = String::with_capacity(96 + body.len());
        let _ = write!(
            line,
            "\n{} {} {} {} {}\n",
            job.delivery_id.0,
            job.due_at.millis(),
            job.created_at.millis(),
            job.event,
            body.len()
        );
        line.push_str(body);
        (HEADER + line.len() <= LONGEST).then_some(Line(line))
    }
}

/// The jobs a payload hands over; `None` when it hands none. A damaged
/// payload that still names its organization hands no job under epoch 0
/// (no holder's): the holder reads the rows instead.
pub fn decode(payload: &str) -> Option<Handed> {
    let rest = payload.strip_prefix(PREFIX)?;
    let org = OrgId(rest.get(..36)?.parse().ok()?);
    Some(jobs_of(org, rest).unwrap_or(Handed {
        org,
        epoch: 0,
        jobs: Vec::new(),
    }))
}

/// The jobs `rest` (after the prefix) hands over.
fn jobs_of(org: OrgId, rest: &str) -> Option<Handed> {
    let (header, mut rest) = rest.split_once('\n').unwrap_or((rest, ""));
    let (named, epoch) = header.split_once(' ')?;
    if named.parse::<Uuid>().ok()? != org.0 {
        return None;
    }
    let epoch: i64 = epoch.parse().ok()?;
    let mut jobs = Vec::new();
    while !rest.is_empty() {
        let (line, after) = rest.split_once('\n')?;
        let mut fields = line.split(' ');
        let id: Uuid = fields.next()?.parse().ok()?;
        let due: i64 = fields.next()?.parse().ok()?;
        let created: i64 = fields.next()?.parse().ok()?;
        let event = fields.next()?.to_owned();
        let len: usize = fields.next()?.parse().ok()?;
        if fields.next().is_some() || after.len() < len || !after.is_char_boundary(len) {
            return None;
        }
        let (body, next) = after.split_at(len);
        rest = match next.strip_prefix('\n') {
            Some(next) => next,
            None if next.is_empty() => next,
            None => return None,
        };
        jobs.push(Job {
            delivery_id: DeliveryId(id),
            organization_id: org,
            event,
            body: body.as_bytes().to_vec(),
            attempts_made: 0,
            due_at: Timestamp(due),
            created_at: Timestamp(created),
            held_under: None,
            holder_told: None,
        });
    }
    Some(Handed { org, epoch, jobs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventKind;

    fn job(org: OrgId, body: &str) -> Job {
        Job::new(org, EventKind::TaskCreated, body.as_bytes().to_vec())
    }

    #[test]
    fn handed_jobs_come_back_as_they_were_sent() {
        let org = OrgId::generate();
        let jobs = [
            job(
                org,
                r#"{"type":"task.created","data":{"title":"two\nlines, spaces"}}"#,
            ),
            job(org, "{}"),
        ];
        let mut payloads = Payloads::new(org, 12);
        for job in &jobs {
            let Some(line) = Line::of(job) else {
                panic!("a small job is handed")
            };
            payloads.push(&line);
        }
        let payloads = payloads.finish();
        assert_eq!(payloads.len(), 1);
        let Some(handed) = decode(&payloads[0]) else {
            panic!("not decoded: {}", payloads[0]);
        };
        assert_eq!(handed.org, org);
        assert_eq!(handed.epoch, 12);
        assert_eq!(handed.jobs, jobs);
    }

    #[test]
    fn payloads_stay_under_postgresqls_limit_and_a_job_too_big_is_not_handed() {
        let org = OrgId::generate();
        let body = format!(r#"{{"pad":"{}"}}"#, "x".repeat(3000));
        let mut payloads = Payloads::new(org, 1);
        for _ in 0..5 {
            let Some(line) = Line::of(&job(org, &body)) else {
                panic!("3,000 bytes are handed")
            };
            payloads.push(&line);
        }
        assert!(
            Line::of(&job(org, &"y".repeat(LONGEST))).is_none(),
            "too big"
        );
        let payloads = payloads.finish();
        assert_eq!(payloads.len(), 3, "two jobs a payload");
        assert!(payloads.iter().all(|p| p.len() <= LONGEST));
        let handed: usize = payloads
            .iter()
            .map(|p| decode(p).map_or(0, |h| h.jobs.len()))
            .sum();
        assert_eq!(handed, 5);
        assert!(Payloads::new(org, 1).finish().is_empty());
    }

    #[test]
    fn other_and_damaged_payloads_hand_nothing() {
        let org = OrgId::generate();
        let mut payloads = Payloads::new(org, 3);
        if let Some(line) = Line::of(&job(org, r#"{"a":1}"#)) {
            payloads.push(&line);
        }
        let good = payloads.finish().remove(0);
        assert!(decode(&org.0.to_string()).is_none(), "a plain wake-up");
        assert!(decode("stopped:x").is_none());
        assert!(decode("handed:nonsense").is_none());
        let damaged = |payload: String| {
            let handed = decode(&payload);
            assert_eq!(
                handed.as_ref().map(|h| (h.org, h.epoch, h.jobs.len())),
                Some((org, 0, 0)),
                "{payload}"
            );
        };
        damaged(good[..good.len() - 2].to_owned());
        damaged(good.replace(" 3\n", " three\n"));
        damaged(format!("{good}trailing"));
        assert_eq!(decode(&good).map(|h| h.jobs.len()), Some(1));
    }
}
