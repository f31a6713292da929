//! The organization actor: the single writer of one organization.
//!
//! It decides each command against its current state (pure domain code),
//! commits the writes in one transaction, waits for durability, publishes
//! the new snapshot, and only then answers. It handles one message at a
//! time (`AtomicResponse`), so rules such as "one Owner at least" and
//! name uniqueness hold without races.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::actors::messages::{Mutate, OrgCommand};
use crate::actors::registry::Registry;
use crate::domain::audit::AuditRecord;
use crate::domain::commands::{members, organization, roles, webhooks, Change, Reply};
use crate::domain::error::ApiError;
use crate::domain::org_state::OrgState;
use crate::services::Services;
use crate::storage::Write;
use crate::time::Timestamp;

/// The writer of one organization.
pub struct OrganizationActor {
    /// The state as of the last committed change (ahead of the published
    /// snapshot only while a flush is awaited).
    state: Arc<OrgState>,
    services: Arc<Services>,
    /// To remove itself when it stops for idleness.
    registry: Arc<Registry>,
    last_active: Instant,
}

impl OrganizationActor {
    /// An actor continuing from the published snapshot.
    pub fn new(state: Arc<OrgState>, services: Arc<Services>, registry: Arc<Registry>) -> Self {
        OrganizationActor {
            state,
            services,
            registry,
            last_active: Instant::now(),
        }
    }

    fn decide(&self, msg: &Mutate) -> Result<Change, ApiError> {
        let state = &self.state;
        let caller = msg.caller;
        match &msg.command {
            OrgCommand::CreateRole(input) => roles::create_role(state, caller, input),
            OrgCommand::UpdateRole(role, if_match, input) => {
                roles::update_role(state, caller, *role, if_match.as_ref(), input)
            }
            OrgCommand::DeleteRole(role, if_match) => {
                roles::delete_role(state, caller, *role, if_match.as_ref())
            }
            OrgCommand::AddMember(input) => {
                members::add_member(state, caller, &self.services.accounts, input)
            }
            OrgCommand::ChangeMemberRole(user, input) => {
                members::change_member_role(state, caller, *user, input)
            }
            OrgCommand::RemoveMember(user) => members::remove_member(state, caller, *user),
            OrgCommand::UpdateOrganization(input) => {
                organization::update_organization(state, caller, input)
            }
            OrgCommand::SaveWebhook(test) => webhooks::save_webhook(state, caller, test),
            OrgCommand::RotateWebhook => webhooks::rotate_webhook(state, caller),
            OrgCommand::DeleteWebhook => webhooks::delete_webhook(state, caller),
        }
    }

    /// The transaction for `change`: its edits, its audit record and the
    /// writes that record its events.
    fn writes(&self, msg: &Mutate, change: &Change, next: &OrgState) -> Vec<Write> {
        let mut writes: Vec<Write> = change.edits.iter().cloned().map(Write::Edit).collect();
        if let Some(draft) = change.audit.clone() {
            let record = AuditRecord::from_draft(
                draft,
                self.state.id(),
                msg.caller.user_id(),
                &msg.request_id,
                Timestamp::now(),
            );
            writes.push(Write::Audit(record));
        }
        writes.extend(self.services.events.stage(next, &change.events));
        writes
    }
}

impl Actor for OrganizationActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let timeout = self.services.org_idle_timeout;
        ctx.run_interval(timeout / 2, move |actor, ctx| {
            if actor.last_active.elapsed() >= timeout {
                actor.registry.forget(actor.state.id(), &ctx.address());
                ctx.stop();
            }
        });
    }
}

impl Handler<Mutate> for OrganizationActor {
    type Result = AtomicResponse<Self, Result<Reply, ApiError>>;

    fn handle(&mut self, msg: Mutate, _ctx: &mut Self::Context) -> Self::Result {
        self.last_active = Instant::now();
        let change = match self.decide(&msg) {
            Ok(change) if change.edits.is_empty() => return ready(Ok(change.reply)),
            Ok(change) => change,
            Err(err) => return ready(Err(err)),
        };
        let next = Arc::new(self.state.apply(&change.edits));
        let writes = self.writes(&msg, &change, &next);
        if let Err(err) = self.services.storage.commit(&writes) {
            return ready(Err(err.into()));
        }
        self.state = next.clone();
        let services = self.services.clone();
        let reply = change.reply;
        AtomicResponse::new(Box::pin(
            async move {
                let durable = services.storage.durable().await;
                services.directory.publish(next);
                if durable.is_ok() {
                    services.delivery.committed(&writes);
                }
                durable.map(|_| reply).map_err(ApiError::from)
            }
            .into_actor(self),
        ))
    }
}

fn ready(
    result: Result<Reply, ApiError>,
) -> AtomicResponse<OrganizationActor, Result<Reply, ApiError>> {
    AtomicResponse::new(Box::pin(fut::ready(result)))
}
