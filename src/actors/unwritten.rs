//! Delivery results handed to the log actor and not yet durable, counted
//! per organization, on a queue several nodes share. Until a result is
//! durable its job's row is still in the outbox (a finished job's delete,
//! a retried one's update, go with the result), so a read under a new lease
//! would take the row and deliver it again. The dispatcher therefore gives
//! up a lease, and reads an organization under a lease it claimed anew,
//! only once nothing of the organization is in flight or unwritten.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::ids::OrgId;

/// Results sent to the log actor and not yet durable, per organization.
#[derive(Debug, Default)]
pub struct Unwritten(Mutex<HashMap<OrgId, usize>>);

impl Unwritten {
    /// A result of `org` was sent to the log actor.
    pub fn sent(&self, org: OrgId) {
        *self.counts().entry(org).or_insert(0) += 1;
    }

    /// Results of these organizations (one per item) are durable, or were
    /// given up (the log actor's buffer overflowed).
    pub fn written(&self, orgs: impl IntoIterator<Item = OrgId>) {
        let mut counts = self.counts();
        for org in orgs {
            if let Some(count) = counts.get_mut(&org) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(&org);
                }
            }
        }
    }

    /// Whether every result of `org` sent so far is durable.
    pub fn none_of(&self, org: OrgId) -> bool {
        !self.counts().contains_key(&org)
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<OrgId, usize>> {
        // A panic while counting leaves the counts whole: each change is one step.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_organization_is_written_once_each_result_sent_is() {
        let (org, other) = (OrgId::generate(), OrgId::generate());
        let unwritten = Unwritten::default();
        assert!(unwritten.none_of(org));
        unwritten.sent(org);
        unwritten.sent(org);
        unwritten.sent(other);
        unwritten.written([org]);
        assert!(!unwritten.none_of(org), "one result of two is written");
        unwritten.written([org, other]);
        assert!(unwritten.none_of(org));
        assert!(unwritten.none_of(other));
        unwritten.written([org]);
        assert!(
            unwritten.none_of(org),
            "more written than sent counts nothing"
        );
    }
}
