//! Delivery results handed to the log actor and not yet durable, counted
//! per organization and delivery, on a queue several nodes share. Until a
//! result is durable its job's row is still in the outbox (a finished
//! job's delete, a retried one's update, go with the result), so a read
//! under a new lease would take the row and deliver it again. The
//! dispatcher therefore gives up a lease, and reads an organization under
//! a lease it claimed anew, only once nothing of the organization is in
//! flight or unwritten; and a read of rows handed to it leaves out the
//! deliveries still unwritten.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::ids::{DeliveryId, OrgId};

/// Results sent to the log actor and not yet durable, per organization
/// and delivery.
#[derive(Debug, Default)]
pub struct Unwritten(Mutex<HashMap<OrgId, HashMap<DeliveryId, usize>>>);

impl Unwritten {
    /// A result of delivery `id` of `org` was sent to the log actor.
    pub fn sent(&self, org: OrgId, id: DeliveryId) {
        *self.counts().entry(org).or_default().entry(id).or_insert(0) += 1;
    }

    /// These results (one per item) are durable, or were given up (the
    /// log actor's buffer overflowed).
    pub fn written(&self, results: impl IntoIterator<Item = (OrgId, DeliveryId)>) {
        let mut counts = self.counts();
        for (org, id) in results {
            let Some(ids) = counts.get_mut(&org) else {
                continue;
            };
            if let Some(count) = ids.get_mut(&id) {
                *count -= 1;
                if *count == 0 {
                    ids.remove(&id);
                }
            }
            if ids.is_empty() {
                counts.remove(&org);
            }
        }
    }

    /// Whether every result of `org` sent so far is durable.
    pub fn none_of(&self, org: OrgId) -> bool {
        !self.counts().contains_key(&org)
    }

    /// The deliveries of `org` with a result not yet durable.
    pub fn ids_of(&self, org: OrgId) -> Vec<DeliveryId> {
        self.counts()
            .get(&org)
            .map(|ids| ids.keys().copied().collect())
            .unwrap_or_default()
    }

    fn counts(&self) -> MutexGuard<'_, HashMap<OrgId, HashMap<DeliveryId, usize>>> {
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
        let (first, second, third) = (
            DeliveryId::generate(),
            DeliveryId::generate(),
            DeliveryId::generate(),
        );
        let unwritten = Unwritten::default();
        assert!(unwritten.none_of(org));
        unwritten.sent(org, first);
        unwritten.sent(org, first);
        unwritten.sent(org, second);
        unwritten.sent(other, third);
        unwritten.written([(org, first)]);
        assert!(!unwritten.none_of(org), "two results of three are not");
        let mut ids = unwritten.ids_of(org);
        ids.sort();
        let mut both = vec![first, second];
        both.sort();
        assert_eq!(ids, both);
        unwritten.written([(org, first), (org, second), (other, third)]);
        assert!(unwritten.none_of(org));
        assert!(unwritten.none_of(other));
        assert!(unwritten.ids_of(org).is_empty());
        unwritten.written([(org, first)]);
        assert!(
            unwritten.none_of(org),
            "more written than sent counts nothing"
        );
    }
}
