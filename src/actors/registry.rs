//! Finds the actor of an organization, starting it on first use. An actor
//! that stopped for idleness is replaced transparently: a message that found
//! its mailbox closed was never processed, so it is sent again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use actix::{Actor, Addr, MailboxError};

use crate::actors::messages::Mutate;
use crate::actors::organization::OrganizationActor;
use crate::commit::CommitPath;
use crate::domain::commands::Reply;
use crate::domain::error::ApiError;
use crate::ids::OrgId;
use crate::state::accounts::AccountTable;
use crate::state::directory::Directory;

/// Organization id → live actor.
pub struct Registry {
    actors: Mutex<HashMap<OrgId, Addr<OrganizationActor>>>,
    /// Where a new actor finds its organization's snapshot.
    directory: Arc<Directory>,
    commit: Arc<CommitPath>,
    users: Arc<AccountTable>,
    idle_timeout: Duration,
    /// Handed to actors so they can remove themselves.
    this: Weak<Registry>,
}

impl Registry {
    /// An empty registry; its actors stop after `idle_timeout` without messages.
    pub fn new(
        directory: Arc<Directory>,
        commit: Arc<CommitPath>,
        users: Arc<AccountTable>,
        idle_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new_cyclic(|this| Registry {
            actors: Mutex::new(HashMap::new()),
            directory,
            commit,
            users,
            idle_timeout,
            this: this.clone(),
        })
    }

    /// The live actor of `org`, started on the current arbiter if needed.
    fn address(&self, org: OrgId) -> Result<Addr<OrganizationActor>, ApiError> {
        let mut actors = self.actors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(addr) = actors.get(&org).filter(|a| a.connected()) {
            return Ok(addr.clone());
        }
        let state = self
            .directory
            .get(org)
            .ok_or(ApiError::NotFound("organization"))?;
        let registry = self.this.clone();
        let on_idle = Box::new(move |org: OrgId, addr: &Addr<OrganizationActor>| {
            if let Some(registry) = registry.upgrade() {
                registry.forget(org, addr);
            }
        });
        let actor = OrganizationActor::new(
            state,
            self.commit.clone(),
            self.users.clone(),
            self.idle_timeout,
            on_idle,
        );
        let addr = actor.start();
        actors.insert(org, addr.clone());
        Ok(addr)
    }

    /// Removes `addr` as the actor of `org` (if it still is).
    fn forget(&self, org: OrgId, addr: &Addr<OrganizationActor>) {
        let mut actors = self.actors.lock().unwrap_or_else(|e| e.into_inner());
        if actors.get(&org) == Some(addr) {
            actors.remove(&org);
        }
    }

    /// How many organization actors are running.
    pub fn live_actors(&self) -> usize {
        self.actors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|a| a.connected())
            .count()
    }

    /// Runs a mutation on the organization's actor.
    pub async fn mutate(&self, org: OrgId, msg: Mutate) -> Result<Reply, ApiError> {
        for _ in 0..3 {
            let addr = self.address(org)?;
            match addr.send(msg.clone()).await {
                Ok(result) => return result,
                Err(MailboxError::Closed) => self.forget(org, &addr),
                Err(err) => return Err(ApiError::internal(err)),
            }
        }
        Err(ApiError::internal(MailboxError::Closed))
    }
}
