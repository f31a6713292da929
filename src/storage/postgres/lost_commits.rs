//! Whether a commit whose answer was lost landed. A commit sent on a
//! connection that broke before its answer came back may have been made:
//! PostgreSQL runs what it received, and commits it, without noticing
//! that the client left. When the transaction wrote a row that did not
//! exist before it (a new resource, audit record, user or delivery), that
//! row, found once the database answers again, proves the whole
//! transaction landed: its writers are answered as committed, instead of
//! 503 "may have been made", and a client without an idempotency key does
//! not make the change twice by trying again.
//!
//! A row not found proves nothing: the broken connection's transaction
//! may still be running (PostgreSQL finishes the statement it received
//! before it reads the closed socket). It is looked for again a few times,
//! over most of a second, for a commit waiting for its flush; not found
//! then, the answer stays "may have been made".

use std::time::Duration;

use uuid::Uuid;

use super::transact::Database;
use crate::domain::change::Write;
use crate::storage::StoreError;

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

/// Whether the commit of `writes`, whose answer was lost, is found made
/// within the statement timeout.
pub async fn made<'w>(database: &Database, writes: impl IntoIterator<Item = &'w Write>) -> bool {
    let Some(marker) = Marker::of(writes) else {
        return false;
    };
    let made = marker.landed(database, database.timeout).await == Some(true);
    if made {
        tracing::info!(
            ?marker,
            "a commit whose answer was lost was made; it is answered as made"
        );
    }
    made
}

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

    /// Whether the row is stored: `Some(true)` proves its commit landed;
    /// `None` when the database gave no answer within `within`. Each look
    /// runs to its own end (a connection whose look failed or timed out is
    /// dropped, never handed back mid-round), and none starts after
    /// `within`.
    pub async fn landed(&self, database: &Database, within: Duration) -> Option<bool> {
        let deadline = tokio::time::Instant::now() + within;
        let mut again = LOOKS_AGAIN.iter();
        while tokio::time::Instant::now() < deadline {
            let pause = match self.look(database).await {
                Ok(true) => return Some(true),
                Ok(false) => match again.next() {
                    Some(pause) => *pause,
                    None => return Some(false),
                },
                Err(StoreError::Unavailable(_) | StoreError::Unconfirmed(_)) => PAUSE,
                Err(_) => return None,
            };
            tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + pause)).await;
        }
        None
    }

    async fn look(&self, database: &Database) -> Result<bool, StoreError> {
        const WHAT: &str = "the check of a commit whose answer was lost";
        let rows = match self {
            Marker::Resource(org, kind, id) => {
                database
                    .query(
                        WHAT,
                        "SELECT 1 FROM resources \
                         WHERE organization_id = $1 AND kind = $2 AND id = $3",
                        &[org, kind, id],
                    )
                    .await?
            }
            Marker::Audit(org, id) => {
                database
                    .query(
                        WHAT,
                        "SELECT 1 FROM audit_log WHERE organization_id = $1 AND id = $2",
                        &[org, id],
                    )
                    .await?
            }
            Marker::User(id) => {
                database
                    .query(WHAT, "SELECT 1 FROM users WHERE id = $1", &[id])
                    .await?
            }
            Marker::Job(org, delivery) => {
                database
                    .query(
                        WHAT,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::audit::AuditRecord;
    use crate::domain::delivery::Job;
    use crate::domain::user::User;
    use crate::ids::{AuditId, DeliveryId, OrgId, UserId};
    use crate::time::Timestamp;

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
