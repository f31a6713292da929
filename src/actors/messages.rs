//! Every actor message, in one place.

use actix::Message;

use crate::actors::send_permits::Gate;
use crate::domain::access::{Caller, IfMatch, Needs};
use crate::domain::audit::RequestIdText;
use crate::domain::change::Write;
use crate::domain::commands::webhooks::{Generation, Health};
use crate::domain::commands::Reply;
use crate::domain::delivery::{AttemptOutcome, Job, LogRecord, Stopped};
use crate::domain::error::ApiError;
use crate::domain::input::Input;
use crate::domain::webhook::PassedTest;
use crate::ids::{OrgId, RoleId, UserId};

/// A mutation of one organization.
#[derive(Clone, Debug)]
pub enum OrgCommand {
    /// Create a custom role.
    CreateRole(Input),
    /// Edit a role.
    UpdateRole(RoleId, Option<IfMatch>, Input),
    /// Delete a role.
    DeleteRole(RoleId, Option<IfMatch>),
    /// Invite a user.
    AddMember(Input),
    /// Change a member's role.
    ChangeMemberRole(UserId, Input),
    /// Remove a member.
    RemoveMember(UserId),
    /// Rename or change the plan.
    UpdateOrganization(Input),
    /// Save the endpoint of a passed test.
    SaveWebhook(PassedTest),
    /// Rotate the signing secret.
    RotateWebhook,
    /// Remove the endpoint.
    DeleteWebhook,
    /// Record the fall-back of a member's expired role assignment.
    ExpireRole(UserId),
    /// Record what delivery learned of this save of the endpoint.
    EndpointHealth(Generation, Health),
}

impl OrgCommand {
    /// Whether a client's command changes what delivery attempts use (the
    /// endpoint's URL, events and secret, or its existence): on a shared
    /// store its answer waits
    /// [`crate::state::recent_checks::ENDPOINT_CHANGE_WAIT`].
    pub fn changes_endpoint(&self) -> bool {
        matches!(
            self,
            OrgCommand::SaveWebhook(_) | OrgCommand::RotateWebhook | OrgCommand::DeleteWebhook
        )
    }
}

/// Asks an organization actor to run a command; answers once the change is
/// durable and visible to every later request.
#[derive(Clone, Debug, Message)]
#[rtype(result = "Result<Reply, ApiError>")]
pub struct Mutate {
    /// Who asks.
    pub caller: Caller,
    /// The request, for the audit record.
    pub request_id: RequestIdText,
    /// What the route needs of the caller.
    pub needs: Needs,
    /// What to do.
    pub command: OrgCommand,
    /// For a request under an idempotency key: its answer's record, made
    /// of the reply and committed with the change (even one that changes
    /// nothing). `None` from it for a reply that is not recorded.
    pub answer: Option<RecordAnswer>,
}

/// Makes the write that records a request's answer from its reply.
#[derive(Clone)]
pub struct RecordAnswer(pub std::sync::Arc<RecordFn>);

/// What [`RecordAnswer`] runs.
pub type RecordFn = dyn Fn(&Reply) -> Option<Write> + Send + Sync;

impl std::fmt::Debug for RecordAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordAnswer")
    }
}

impl Mutate {
    /// A command of the service itself (no caller, no key needed): a role
    /// assignment's expiry, an endpoint's health. Audited with no actor.
    pub fn system(command: OrgCommand) -> Self {
        Mutate {
            caller: Caller::Admin,
            request_id: RequestIdText::generate(),
            needs: Needs {
                keys: &[],
                or_self: false,
            },
            command,
            answer: None,
        }
    }
}

/// Durable jobs to schedule (new events, redeliveries, or recovered at start).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Enqueue(pub Vec<Job>);

/// A delivery actor finished an attempt of `job`.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AttemptFinished {
    /// The job as it was when the attempt started.
    pub job: Job,
    /// How it went.
    pub outcome: AttemptOutcome,
}

/// The endpoint of an organization was removed or disabled: drop its
/// queued attempts.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct DropOrg(pub OrgId, pub Stopped);

/// Stop starting attempts; answers once none is in flight.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Drain;

/// Make the next attempt of a job; on a shared queue, its request waits
/// at the gate (the in-flight limits, and its lease's trust).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Deliver(pub Job, pub Option<Gate>);

/// An attempt of `job` was not made, for `why`.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AttemptNotMade {
    /// The job, as it was before the attempt.
    pub job: Job,
    /// Why.
    pub why: NotMade,
}

/// Why an attempt on a shared queue was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotMade {
    /// Its lease lapsed while it waited at the gate: another node may
    /// have the organization now.
    LeaseLapsed,
    /// Its organization's revision could not be read (the database
    /// away): another node may have changed the endpoint or rotated its
    /// secret, so nothing is sent until it can be read (CONTRACT §8). A
    /// node cut off from the database thus stops sending what it could
    /// not record, instead of sending it for a node taking over to send
    /// again.
    Unchecked,
}

/// Append an attempt record, with the outbox write it implies.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AppendLog {
    /// The record.
    pub record: LogRecord,
    /// Delete or update the job, in the same transaction.
    pub job: Option<Write>,
}

/// Records were written for this organization elsewhere (skipped records):
/// consider it for pruning.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Touched(pub OrgId);

/// Write everything buffered now; answers once it is written.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct FlushLog;
