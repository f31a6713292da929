//! The in-memory directory of organization snapshots that every request
//! reads. Only the commit path replaces a snapshot: once the change that
//! made it is durable and before it is answered, so a change is visible to
//! the very next request; and, on a store other nodes share, when a
//! request finds the stored revision ahead of it (a reload).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use crate::domain::org_state::OrgState;
use crate::ids::{OrgId, UserId};

/// Org snapshots plus the user → organizations index behind `/me`.
#[derive(Default)]
pub struct Directory {
    /// A std lock, not an async one: it is held only for a map lookup or insert.
    orgs: RwLock<HashMap<OrgId, Arc<OrgState>>>,
    /// Which organizations each user belongs to, kept in step with `orgs`.
    user_orgs: RwLock<HashMap<UserId, BTreeSet<OrgId>>>,
}

impl Directory {
    /// A directory holding `orgs`.
    pub fn new(orgs: Vec<OrgState>) -> Self {
        let directory = Directory::default();
        for org in orgs {
            directory.publish(Arc::new(org));
        }
        directory
    }

    /// The current snapshot of `org`.
    #[inline]
    pub fn get(&self, org: OrgId) -> Option<Arc<OrgState>> {
        self.orgs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&org)
            .cloned()
    }

    /// Replaces (or adds) an organization's snapshot, unless the one
    /// published is newer (a reload that raced a change); answers the
    /// snapshot published after the call.
    pub fn publish(&self, next: Arc<OrgState>) -> Arc<OrgState> {
        let previous = {
            let mut orgs = self.orgs.write().unwrap_or_else(|e| e.into_inner());
            match orgs.get(&next.id()) {
                Some(current) if current.revision > next.revision => return current.clone(),
                _ => orgs.insert(next.id(), next.clone()),
            }
        };
        let mut index = self.user_orgs.write().unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = &previous {
            for user in previous
                .members
                .keys()
                .filter(|u| !next.members.contains_key(u))
            {
                if let Some(set) = index.get_mut(user) {
                    set.remove(&next.id());
                }
            }
        }
        for user in next.members.keys() {
            index.entry(*user).or_default().insert(next.id());
        }
        next
    }

    /// The organizations `user` belongs to, in id order.
    pub fn orgs_of(&self, user: UserId) -> Vec<Arc<OrgState>> {
        let ids: Vec<OrgId> = self
            .user_orgs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&user)
            .map(|set| set.iter().copied().collect())
            .unwrap_or_default();
        ids.into_iter().filter_map(|id| self.get(id)).collect()
    }

    /// How many organizations exist.
    pub fn len(&self) -> usize {
        self.orgs.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether there are no organizations.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
