//! Records expired role assignments. Enforcement needs no timer: from the
//! instant an assignment ends, [`OrgState::permissions_of`] judges the member
//! on Member's keys, on every node. This actor makes the fall-back a change
//! like any other, through the organization's actor: the membership moves
//! to Member, with the audit record `member.role_expired` and the
//! `member.role_changed` event. It asks the store what is due, at start
//! (assignments that ended while the service was down) and then every
//! `actors.role_expiry_sweep_ms`. On several nodes each sweeps; the first
//! commit wins and the others find nothing left to do.
//!
//! [`OrgState::permissions_of`]: crate::domain::org_state::OrgState::permissions_of

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use crate::actors::messages::{Mutate, OrgCommand};
use crate::actors::registry::Registry;
use crate::commit::CommitPath;
use crate::time::Timestamp;

/// The sweeper.
pub struct RoleExpiry {
    commit: Arc<CommitPath>,
    registry: Arc<Registry>,
    every: Duration,
    /// A sweep is running: the next tick waits for it.
    sweeping: bool,
}

impl RoleExpiry {
    /// A sweeper every `every`.
    pub fn new(commit: Arc<CommitPath>, registry: Arc<Registry>, every: Duration) -> Self {
        RoleExpiry {
            commit,
            registry,
            every,
            sweeping: false,
        }
    }

    fn sweep(&mut self, ctx: &mut Context<Self>) {
        if self.sweeping {
            return;
        }
        self.sweeping = true;
        let (commit, registry) = (self.commit.clone(), self.registry.clone());
        let work = async move { record_due(&commit, &registry).await };
        ctx.spawn(
            work.into_actor(self)
                .map(|_, actor, _| actor.sweeping = false),
        );
    }
}

/// Records the fall-back of every assignment due now.
async fn record_due(commit: &CommitPath, registry: &Registry) {
    let due = match commit.store().due_role_expiries(Timestamp::now()).await {
        Ok(due) => due,
        Err(err) => {
            tracing::warn!(error = %err, "role expiry: the store could not list what is due");
            return;
        }
    };
    for (org, user) in due {
        // A node that has not read the organization yet (or is behind) reads it first.
        if let Err(err) = commit.fresh_snapshot(org, None).await {
            tracing::warn!(error = %err, %org, "role expiry: the organization could not be read");
            continue;
        }
        let msg = Mutate::system(OrgCommand::ExpireRole(user));
        if let Err(err) = registry.mutate(org, msg).await {
            tracing::warn!(error = %err, %org, %user, "role expiry: the fall-back was not recorded; the next sweep tries again");
        }
    }
}

impl Actor for RoleExpiry {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.sweep(ctx);
        ctx.run_interval(self.every, |actor, ctx| actor.sweep(ctx));
    }
}
