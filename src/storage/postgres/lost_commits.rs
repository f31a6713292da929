//! What became of a commit whose answer was lost. A commit sent on a
//! connection that broke, or went silent, before its answer came back may
//! have been made: PostgreSQL runs what it received, and commits it,
//! without noticing that the client left; bytes delayed on the way may even
//! reach it later. When the transaction wrote a row that did not exist
//! before it (a new resource, audit record, user or delivery), that row
//! tells:
//! - found, the whole transaction landed: its writers are answered as
//!   committed, instead of 503 "may have been made", and a client without
//!   an idempotency key does not make the change twice by trying again;
//! - not found, nothing proves it will not land later, while its server
//!   process lives. So that process is ended first ([`super::backends`]):
//!   once it is gone its transaction is over, and a row not found then was
//!   never written. The commit runs again, once, on another connection.
//! - When the process cannot be ended (its connection could not tell it,
//!   or the database does not answer), the row is looked for again a
//!   few times over most of a second, for a commit waiting for its flush;
//!   not found then, the answer stays "may have been made".

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::backends::Backend;
use super::batch::Statement;
use super::idle_probe;
use super::transact::{Database, Failed};
use crate::domain::change::Write;
use crate::storage::StoreError;

/// What became of a commit whose answer was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// It landed.
    Made,
    /// Its server process is gone and it did not land: it never will.
    NotMade,
    /// Not known.
    Unknown,
}

/// Commits `statements`, whose writes add `marker`'s row ([`Marker::of`]):
/// when the answer is lost, as [`Settled::answer`] says.
pub async fn commit(
    database: &Database,
    statements: &[Statement],
    marker: Option<&Marker>,
) -> Result<(), StoreError> {
    let mut run = 0;
    loop {
        run += 1;
        let Err(failed) = database.transact_traced(statements).await else {
            return Ok(());
        };
        let Failed {
            error: StoreError::Unconfirmed(why),
            backend,
            ..
        } = failed
        else {
            return Err(failed.error);
        };
        if let Some(answer) = settle(database, marker, backend).await.answer(run, why) {
            return answer;
        }
    }
}

impl Settled {
    /// The answer to a commit whose answer was lost (`why`) on its `run`th
    /// run: committed once found made; `None`, to run it again, the first
    /// time it surely was not; [`StoreError::Unconfirmed`] when that is not
    /// known.
    pub fn answer(self, run: u32, why: String) -> Option<Result<(), StoreError>> {
        match self {
            Settled::Made => Some(Ok(())),
            Settled::NotMade if run == 1 => None,
            Settled::NotMade => Some(Err(StoreError::Unavailable(format!(
                "{why}; its transaction was ended before it committed, so nothing was changed"
            )))),
            Settled::Unknown => Some(Err(StoreError::Unconfirmed(why))),
        }
    }
}

/// What became of a commit whose answer was lost, which added `marker`'s
/// row, run by `backend` if known: settled within the statement timeout.
pub async fn settle(
    database: &Database,
    marker: Option<&Marker>,
    backend: Option<Backend>,
) -> Settled {
    let Some(marker) = marker else {
        return Settled::Unknown;
    };
    let settled = marker.settle(database, backend).await;
    match settled {
        Settled::Made => tracing::info!(
            ?marker,
            "a commit whose answer was lost was made; it is answered as made"
        ),
        Settled::NotMade => tracing::info!(
            ?marker,
            "a commit whose answer was lost was ended before it committed; nothing was changed"
        ),
        Settled::Unknown => {}
    }
    settled
}

/// A row only the lost commit could have written.
#[derive(Debug, PartialEq, Eq)]
pub enum Marker {
    /// A new workspace resource: organization, kind, id.
    Resource(Uuid, &'static str, Uuid),
    /// An audit record: organization, id.
    Audit(Uuid, Uuid),
    /// A new user.
    User(Uuid),
    /// A new delivery: organization, delivery id. Its outbox row is
    /// deleted once it is delivered, and its log record kept.
    Job(Uuid, Uuid),
}

/// Pause between asks while the database does not answer.
const PAUSE: Duration = Duration::from_millis(100);

/// Pauses before looking again for a row not found: 50, 100, 200 and 400 ms.
const LOOKS_AGAIN: [Duration; 4] = [
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
];

impl Marker {
    /// The first row of `writes` that did not exist before them, if any.
    pub fn of<'w>(writes: impl IntoIterator<Item = &'w Write>) -> Option<Marker> {
        writes.into_iter().find_map(|write| match write {
            Write::NewResource(org, value) => {
                Some(Marker::Resource(org.0, value.kind().name(), value.id().0))
            }
            Write::Audit(record) => Some(Marker::Audit(record.organization_id.0, record.id.0)),
            Write::PutUser(user) => Some(Marker::User(user.id.0)),
            write => write
                .new_job()
                .map(|job| Marker::Job(job.organization_id.0, job.delivery_id.0)),
        })
    }

    /// What became of its commit, run by `backend` if known: looked for;
    /// if not found, its server process ended, then looked for once more;
    /// without that, looked for again a few times ([`Marker::landed`]).
    async fn settle(&self, database: &Database, backend: Option<Backend>) -> Settled {
        let ask = Asker::new(database);
        let Some(backend) = backend else {
            return self.look_a_while(&ask, "its server process unknown").await;
        };
        match self.look(&ask).await {
            Ok(true) => Settled::Made,
            Ok(false) => match ended(&ask, backend).await {
                Ok(()) => match self.look(&ask).await {
                    Ok(true) => Settled::Made,
                    Ok(false) => Settled::NotMade,
                    Err(err) => unknown(&format!("its last look got no answer: {err}")),
                },
                Err(why) => self.look_a_while(&ask, &why).await,
            },
            Err(err) => unknown(&format!("its looks got no answer: {err}")),
        }
    }

    /// Looks until the statement timeout is over ([`Marker::landed`]),
    /// since its server process could not be ended (`why`): made when
    /// found, otherwise not known.
    async fn look_a_while(&self, ask: &Asker<'_>, why: &str) -> Settled {
        match self.landed(ask).await {
            Some(true) => Settled::Made,
            _ => unknown(why),
        }
    }

    /// Whether the row is stored: `Some(true)` proves its commit landed;
    /// `None` when the database gave no answer in time. A row not found is
    /// looked for again after each of [`LOOKS_AGAIN`], for a commit waiting
    /// for its flush.
    async fn landed(&self, ask: &Asker<'_>) -> Option<bool> {
        let mut pauses = LOOKS_AGAIN.iter();
        loop {
            match self.look(ask).await {
                Ok(true) => return Some(true),
                Ok(false) => match pauses.next() {
                    Some(pause) if ask.left() > *pause => tokio::time::sleep(*pause).await,
                    _ => return Some(false),
                },
                Err(_) => return None,
            }
        }
    }

    async fn look(&self, ask: &Asker<'_>) -> Result<bool, StoreError> {
        let rows = match self {
            Marker::Resource(org, kind, id) => {
                ask.ask(
                    "SELECT 1 FROM resources \
                         WHERE organization_id = $1 AND kind = $2 AND id = $3",
                    &[org, kind, id],
                )
                .await?
            }
            Marker::Audit(org, id) => {
                ask.ask(
                    "SELECT 1 FROM audit_log WHERE organization_id = $1 AND id = $2",
                    &[org, id],
                )
                .await?
            }
            Marker::User(id) => ask.ask("SELECT 1 FROM users WHERE id = $1", &[id]).await?,
            Marker::Job(org, delivery) => {
                ask.ask(
                    "SELECT 1 WHERE EXISTS (SELECT 1 FROM outbox \
                           WHERE organization_id = $1 AND delivery_id = $2) \
                         OR EXISTS (SELECT 1 FROM delivery_log \
                           WHERE organization_id = $1 AND delivery_id = $2)",
                    &[org, delivery],
                )
                .await?
            }
        };
        Ok(!rows.is_empty())
    }
}

/// What the statements of this module are, in errors.
const WHAT: &str = "the check of a commit whose answer was lost";

/// Pause between looks at whether an ended server process is gone.
const GONE_YET: Duration = Duration::from_millis(10);

/// A commit whose fate is not known, and why, told to the operator.
fn unknown(why: &str) -> Settled {
    tracing::info!(%why, "a commit whose answer was lost may have been made; its requests answer 503");
    Settled::Unknown
}

/// Ends the server process `backend` and waits until it is gone, within
/// the statement timeout; or says why it could not. It is gone once it has
/// left `pg_stat_activity`, after its transaction ended (committed, or
/// rolled back when it had not). A process still committing, its commit
/// record waiting for its flush, finishes the commit first.
async fn ended(ask: &Asker<'_>, backend: Backend) -> Result<(), String> {
    let (pid, started) = (&backend.pid, &backend.started);
    ask.ask(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE pid = $1 AND backend_start = $2",
        &[pid, started],
    )
    .await
    .map_err(|err| format!("its server process could not be ended: {err}"))?;
    loop {
        let there = ask
            .ask(
                "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2",
                &[pid, started],
            )
            .await
            .map_err(|err| format!("whether its server process is gone is not known: {err}"))?;
        if there.is_empty() {
            return Ok(());
        }
        // Time is kept for the look that follows.
        if ask.left() <= GONE_YET + ask.each {
            return Err("its server process was not gone within the statement timeout".into());
        }
        tokio::time::sleep(GONE_YET).await;
    }
}

/// Asks the database small questions within the statement timeout, each
/// within [`idle_probe::answer_within`] it: a question whose connection is
/// silent, or that found no connection, is asked again, on another one.
struct Asker<'d> {
    database: &'d Database,
    deadline: Instant,
    each: Duration,
}

impl<'d> Asker<'d> {
    fn new(database: &'d Database) -> Self {
        Asker {
            database,
            deadline: Instant::now() + database.timeout,
            each: idle_probe::answer_within(database.timeout),
        }
    }

    /// The time left.
    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// `sql`'s rows, once the database answers, if it does in time.
    async fn ask(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        loop {
            let limit = self.each.min(self.left());
            let asked = self.database.query_within(limit, WHAT, sql, params).await;
            match asked {
                Err(StoreError::Unavailable(_) | StoreError::Unconfirmed(_))
                    if self.left() > PAUSE =>
                {
                    tokio::time::sleep(PAUSE).await;
                }
                answer => return answer,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::audit::AuditRecord;
    use crate::domain::delivery::Job;
    use crate::domain::user::User;
    use crate::ids::{AuditId, DeliveryId, OrgId, UserId};
    use crate::time::Timestamp;

    #[test]
    fn a_lost_commit_surely_not_made_runs_again_once_and_one_not_known_stays_unconfirmed() {
        let why = || "no answer".to_owned();
        assert!(matches!(Settled::Made.answer(1, why()), Some(Ok(()))));
        assert!(Settled::NotMade.answer(1, why()).is_none(), "run again");
        assert!(matches!(
            Settled::NotMade.answer(2, why()),
            Some(Err(StoreError::Unavailable(_)))
        ));
        assert!(matches!(
            Settled::Unknown.answer(1, why()),
            Some(Err(StoreError::Unconfirmed(w))) if w == "no answer"
        ));
    }

    #[test]
    fn the_marker_is_the_first_row_the_writes_add_and_updates_have_none() {
        let org = OrgId::generate();
        let user = User {
            id: UserId::generate(),
            email: "a@example.test".into(),
            name: None,
            created_at: Timestamp::now(),
        };
        let audit = AuditRecord {
            id: AuditId::generate(),
            organization_id: org,
            actor_user_id: None,
            action: "role.created".into(),
            target_type: "role".into(),
            target_id: "r".into(),
            before: None,
            after: None,
            request_id: "req".into(),
            occurred_at: Timestamp::now(),
        };
        let updates = [
            Write::OrgRevision(org, 2),
            Write::DeleteJob(org, DeliveryId::generate()),
        ];
        assert_eq!(
            Marker::of(&updates),
            None,
            "nothing new: nothing proves a commit"
        );
        let writes = [
            Write::OrgRevision(org, 2),
            Write::Audit(audit.clone()),
            Write::PutUser(user.clone()),
        ];
        assert_eq!(Marker::of(&writes), Some(Marker::Audit(org.0, audit.id.0)));
        assert_eq!(
            Marker::of(&[Write::PutUser(user.clone())]),
            Some(Marker::User(user.id.0))
        );
        let job = Job {
            delivery_id: DeliveryId::generate(),
            organization_id: org,
            event: "task.created".into(),
            body: b"{}".to_vec(),
            attempts_made: 0,
            due_at: Timestamp::now(),
            created_at: Timestamp::now(),
            held_under: None,
            holder_told: None,
        };
        let retry = Job {
            attempts_made: 1,
            ..job.clone()
        };
        assert_eq!(
            Marker::of(&[Write::RetryJob(retry.clone()), Write::PutJob(retry)]),
            None,
            "a retry's row was there before"
        );
        assert_eq!(
            Marker::of(&[Write::PutJob(job.clone())]),
            Some(Marker::Job(org.0, job.delivery_id.0))
        );
    }
}
