//! The organization actor: the single writer of one organization.
//!
//! It decides each command against its current state (pure domain code),
//! hands the change to the commit path (one transaction, durable, the new
//! snapshot published, deliveries handed on), and only then answers. It
//! handles one message at a time, waiting out each commit
//! (`AtomicResponse`), so rules such as "one Owner at least" and name
//! uniqueness hold without races.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

use crate::actors::messages::{Mutate, OrgCommand};
use crate::commit::{Commit, CommitPath};
use crate::domain::commands::{members, organization, roles, webhooks, Change, Reply};
use crate::domain::error::ApiError;
use crate::domain::org_state::OrgState;
use crate::ids::OrgId;
use crate::state::accounts::AccountTable;
use crate::storage::StoreError;
use crate::time::Timestamp;
use crate::webhooks::signing::new_secret;

/// Called when the actor stops for idleness, so whoever started it can
/// forget its address.
pub type OnIdle = Box<dyn Fn(OrgId, &Addr<OrganizationActor>)>;

/// The writer of one organization.
pub struct OrganizationActor {
    /// The state as of the last committed change: the published snapshot.
    state: Arc<OrgState>,
    commit: Arc<CommitPath>,
    /// Users to invite.
    users: Arc<AccountTable>,
    /// How long the actor lives without messages.
    idle_timeout: Duration,
    on_idle: OnIdle,
    last_active: Instant,
}

impl OrganizationActor {
    /// An actor continuing from the published snapshot `state`.
    pub fn new(
        state: Arc<OrgState>,
        commit: Arc<CommitPath>,
        users: Arc<AccountTable>,
        idle_timeout: Duration,
        on_idle: OnIdle,
    ) -> Self {
        OrganizationActor {
            state,
            commit,
            users,
            idle_timeout,
            on_idle,
            last_active: Instant::now(),
        }
    }
}

/// What `msg` asks of `state`, decided by the domain's pure commands.
fn decide(state: &OrgState, users: &AccountTable, msg: &Mutate) -> Result<Change, ApiError> {
    let (caller, needs) = (msg.caller, msg.needs);
    match &msg.command {
        OrgCommand::CreateRole(input) => roles::create_role(state, caller, needs, input),
        OrgCommand::UpdateRole(role, if_match, input) => {
            roles::update_role(state, caller, needs, *role, if_match.as_ref(), input)
        }
        OrgCommand::DeleteRole(role, if_match) => {
            roles::delete_role(state, caller, needs, *role, if_match.as_ref())
        }
        OrgCommand::AddMember(input) => members::add_member(state, caller, needs, users, input),
        OrgCommand::ChangeMemberRole(user, input) => {
            members::change_member_role(state, caller, needs, *user, input)
        }
        OrgCommand::RemoveMember(user) => members::remove_member(state, caller, needs, *user),
        // Which key depends on the fields changed: the command knows.
        OrgCommand::UpdateOrganization(input) => {
            organization::update_organization(state, caller, input)
        }
        OrgCommand::SaveWebhook(test) => webhooks::save_webhook(state, caller, needs, test),
        OrgCommand::RotateWebhook => webhooks::rotate_webhook(state, caller, needs, new_secret()),
        OrgCommand::DeleteWebhook => webhooks::delete_webhook(state, caller, needs),
        OrgCommand::ExpireRole(user) => members::expire_role(state, *user, Timestamp::now()),
        OrgCommand::EndpointHealth(generation, health) => {
            webhooks::record_health(state, *generation, *health)
        }
    }
}

/// The change `msg` makes to `state` and the snapshot it leads to, with
/// the record of the request's answer when it has one;
/// `Ok(Err(reply))` for a command that changes nothing and records nothing.
fn prepare(
    state: &OrgState,
    users: &AccountTable,
    msg: &Mutate,
) -> Result<Result<(Commit, Reply), Reply>, ApiError> {
    let change = decide(state, users, msg)?;
    let record = |reply: &Reply| msg.answer.as_ref().and_then(|answer| (answer.0)(reply));
    if change.edits.is_empty() {
        return Ok(match record(&change.reply) {
            Some(recorded) => Ok((Commit::writes(vec![recorded]), change.reply)),
            None => Err(change.reply),
        });
    }
    let next = Arc::new(state.apply(&change.edits));
    let (mut writes, reply) = change.into_writes(&next, msg.caller.user_id(), &msg.request_id)?;
    writes.extend(record(&reply));
    let commit = Commit {
        writes,
        snapshot: Some(next),
    };
    Ok(Ok((commit, reply)))
}

/// Commits a command gets, each decided on a fresher state when another
/// node changed the organization first, before the caller gets a 503.
const STALE_RETRIES: usize = 3;

/// Commits `msg`'s change, deciding it again on the stored state when
/// another node changed the organization first; answers the reply and the
/// state it left.
async fn commit_deciding_again(
    commit: Arc<CommitPath>,
    users: Arc<AccountTable>,
    msg: Mutate,
    prepared: (Commit, Reply),
) -> Result<(Reply, Option<Arc<OrgState>>), ApiError> {
    let (mut change, mut reply) = prepared;
    for attempt in 1..=STALE_RETRIES {
        let next = change.snapshot.clone();
        let Some(org) = next.as_ref().map(|state| state.id()) else {
            commit.commit(change).await?;
            return Ok((reply, None));
        };
        match commit.commit(change).await {
            Ok(()) => return Ok((reply, next)),
            Err(StoreError::Stale(_)) if attempt < STALE_RETRIES => {
                let fresh = commit
                    .reload(org)
                    .await?
                    .ok_or(ApiError::NotFound("organization"))?;
                match prepare(&fresh, &users, &msg)? {
                    Ok(again) => (change, reply) = again,
                    Err(unchanged) => return Ok((unchanged, Some(fresh))),
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(StoreError::Stale("the organization kept changing on other nodes".into()).into())
}

/// A command's commit: its reply and the state it left.
type CommitFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(Reply, Option<Arc<OrgState>>), ApiError>>>,
>;

/// Runs `msg` once the fall-backs of `due` (assignments that expired and
/// are not recorded yet) are committed, each as its own change, so that a
/// command never overwrites an expired assignment unrecorded (its audit
/// record and event would be lost).
async fn after_fallbacks(
    commit: Arc<CommitPath>,
    users: Arc<AccountTable>,
    mut state: Arc<OrgState>,
    due: Vec<crate::ids::UserId>,
    msg: Mutate,
) -> Result<(Reply, Option<Arc<OrgState>>), ApiError> {
    for user in due {
        let fallback = Mutate {
            caller: crate::domain::access::Caller::Admin,
            request_id: crate::domain::audit::RequestIdText::generate(),
            needs: msg.needs,
            command: OrgCommand::ExpireRole(user),
            answer: None,
        };
        if let Ok(prepared) = prepare(&state, &users, &fallback)? {
            let (_, next) =
                commit_deciding_again(commit.clone(), users.clone(), fallback, prepared).await?;
            if let Some(next) = next {
                state = next;
            }
        }
    }
    let (reply, next) = match prepare(&state, &users, &msg)? {
        Ok(prepared) => commit_deciding_again(commit, users, msg, prepared).await?,
        Err(unchanged) => (unchanged, None),
    };
    Ok((reply, next.or(Some(state))))
}

impl Actor for OrganizationActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let timeout = self.idle_timeout;
        ctx.run_interval(timeout / 2, move |actor, ctx| {
            if actor.last_active.elapsed() >= timeout {
                (actor.on_idle)(actor.state.id(), &ctx.address());
                ctx.stop();
            }
        });
    }
}

impl Handler<Mutate> for OrganizationActor {
    type Result = AtomicResponse<Self, Result<Reply, ApiError>>;

    fn handle(&mut self, msg: Mutate, _: &mut Self::Context) -> Self::Result {
        self.last_active = Instant::now();
        // A request that found the published snapshot behind the
        // database's reloaded it: decide on that.
        if let Some(published) = self.commit.snapshot(self.state.id()) {
            if published.revision > self.state.revision {
                self.state = published;
            }
        }
        let due = match msg.command {
            OrgCommand::ExpireRole(_) => Vec::new(),
            _ => self.state.due_fallbacks(Timestamp::now()),
        };
        let committed = if due.is_empty() {
            let prepared = match prepare(&self.state, &self.users, &msg) {
                Ok(Ok(prepared)) => prepared,
                Ok(Err(unchanged)) => return ready(Ok(unchanged)),
                Err(err) => return ready(Err(err)),
            };
            Box::pin(commit_deciding_again(
                self.commit.clone(),
                self.users.clone(),
                msg,
                prepared,
            )) as CommitFuture
        } else {
            Box::pin(after_fallbacks(
                self.commit.clone(),
                self.users.clone(),
                self.state.clone(),
                due,
                msg,
            ))
        };
        AtomicResponse::new(Box::pin(committed.into_actor(self).map(
            move |committed, actor, _| {
                let (reply, state) = committed?;
                if let Some(state) = state {
                    if state.revision >= actor.state.revision {
                        actor.state = state;
                    }
                }
                Ok(reply)
            },
        )))
    }
}

fn ready(
    result: Result<Reply, ApiError>,
) -> AtomicResponse<OrganizationActor, Result<Reply, ApiError>> {
    AtomicResponse::new(Box::pin(fut::ready(result)))
}
