//! The fair queue of due deliveries: which attempt starts next.
//!
//! Each organization has its own FIFO and at most `per_org` attempts in
//! flight; organizations with a due job and a free slot take turns (round
//! robin) under a global bound of `total`. A slow or dead endpoint
//! therefore fills only its own organization's slots, and only delays that
//! organization.

use std::collections::{HashMap, VecDeque};

use crate::domain::delivery::Job;
use crate::ids::OrgId;

/// Concurrency limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Attempts in flight per organization.
    pub per_org: usize,
    /// Attempts in flight in all.
    pub total: usize,
}

impl Limits {
    /// Twice these limits.
    pub fn doubled(self) -> Limits {
        Limits {
            per_org: self.per_org.saturating_mul(2),
            total: self.total.saturating_mul(2),
        }
    }
}

#[derive(Default)]
struct OrgQueue {
    ready: VecDeque<Job>,
    in_flight: usize,
    /// Whether the org is in the rotation (it has ready jobs and a free slot).
    queued: bool,
}

/// Due jobs by organization, and the attempts in flight.
pub struct FairQueue {
    queues: HashMap<OrgId, OrgQueue>,
    /// Organizations whose turn is coming, in order.
    rotation: VecDeque<OrgId>,
    in_flight: usize,
    limits: Limits,
}

impl FairQueue {
    /// An empty queue under `limits` (each at least 1).
    pub fn new(limits: Limits) -> Self {
        FairQueue {
            queues: HashMap::new(),
            rotation: VecDeque::new(),
            in_flight: 0,
            limits: Limits {
                per_org: limits.per_org.max(1),
                total: limits.total.max(1),
            },
        }
    }

    /// Queues a due job behind its organization's others.
    pub fn push(&mut self, job: Job) {
        let org = job.organization_id;
        let queue = self.queues.entry(org).or_default();
        queue.ready.push_back(job);
        if !queue.queued && queue.in_flight < self.limits.per_org {
            queue.queued = true;
            self.rotation.push_back(org);
        }
    }

    /// The next job to attempt, counted in flight until [`finished`](Self::finished);
    /// `None` when every slot is taken or nothing is due.
    pub fn start_next(&mut self) -> Option<Job> {
        while self.in_flight < self.limits.total {
            let org = self.rotation.pop_front()?;
            let Some(queue) = self.queues.get_mut(&org) else {
                continue;
            };
            let Some(job) = queue.ready.pop_front() else {
                queue.queued = false;
                continue;
            };
            queue.in_flight += 1;
            if !queue.ready.is_empty() && queue.in_flight < self.limits.per_org {
                self.rotation.push_back(org);
            } else {
                queue.queued = false;
            }
            self.in_flight += 1;
            return Some(job);
        }
        None
    }

    /// An attempt of `org` ended: its slot is free again.
    pub fn finished(&mut self, org: OrgId) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let Some(queue) = self.queues.get_mut(&org) else {
            return;
        };
        queue.in_flight = queue.in_flight.saturating_sub(1);
        if !queue.ready.is_empty() && !queue.queued {
            queue.queued = true;
            self.rotation.push_back(org);
        }
        if queue.ready.is_empty() && queue.in_flight == 0 {
            self.queues.remove(&org);
        }
    }

    /// The endpoint of `org` was removed: its due jobs, taken out of the
    /// queue (attempts in flight finish as they will).
    pub fn drop_org(&mut self, org: OrgId) -> Vec<Job> {
        let Some(queue) = self.queues.get_mut(&org) else {
            return Vec::new();
        };
        let dropped: Vec<Job> = queue.ready.drain(..).collect();
        if queue.in_flight == 0 {
            self.queues.remove(&org);
        }
        dropped
    }

    /// Due jobs waiting for a slot.
    pub fn ready(&self) -> usize {
        self.queues.values().map(|q| q.ready.len()).sum()
    }

    /// Attempts in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The limits it starts attempts within.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Attempts of `org` in flight.
    pub fn in_flight_of(&self, org: OrgId) -> usize {
        self.queues.get(&org).map_or(0, |queue| queue.in_flight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventKind;

    fn job(org: OrgId, n: u8) -> Job {
        Job::new(org, EventKind::TaskCreated, vec![n])
    }

    fn drain(queue: &mut FairQueue) -> Vec<(OrgId, u8)> {
        std::iter::from_fn(|| queue.start_next())
            .map(|j| (j.organization_id, j.body[0]))
            .collect()
    }

    #[test]
    fn organizations_take_turns_each_in_its_own_order() {
        let (a, b, c) = (OrgId::generate(), OrgId::generate(), OrgId::generate());
        let mut queue = FairQueue::new(Limits {
            per_org: 10,
            total: 100,
        });
        for n in 0..3 {
            queue.push(job(a, n));
        }
        queue.push(job(b, 0));
        for n in 0..2 {
            queue.push(job(c, n));
        }
        assert_eq!(
            drain(&mut queue),
            [(a, 0), (b, 0), (c, 0), (a, 1), (c, 1), (a, 2)]
        );
        assert_eq!((queue.in_flight(), queue.ready()), (6, 0));
    }

    #[test]
    fn an_organization_never_exceeds_its_slots_and_others_pass_it() {
        let (slow, other) = (OrgId::generate(), OrgId::generate());
        let mut queue = FairQueue::new(Limits {
            per_org: 2,
            total: 100,
        });
        for n in 0..5 {
            queue.push(job(slow, n));
        }
        queue.push(job(other, 0));
        assert_eq!(drain(&mut queue), [(slow, 0), (other, 0), (slow, 1)]);
        assert_eq!(queue.ready(), 3, "slow waits for a free slot");
        queue.push(job(other, 1));
        assert_eq!(drain(&mut queue), [(other, 1)]);
        queue.finished(slow);
        assert_eq!(
            drain(&mut queue),
            [(slow, 2)],
            "one slot freed, one more starts"
        );
    }

    #[test]
    fn the_global_bound_holds_over_all_organizations() {
        let orgs: Vec<OrgId> = (0..4).map(|_| OrgId::generate()).collect();
        let mut queue = FairQueue::new(Limits {
            per_org: 10,
            total: 3,
        });
        for org in &orgs {
            queue.push(job(*org, 0));
            queue.push(job(*org, 1));
        }
        let first = drain(&mut queue);
        assert_eq!(first, [(orgs[0], 0), (orgs[1], 0), (orgs[2], 0)]);
        queue.finished(orgs[1]);
        assert_eq!(
            drain(&mut queue),
            [(orgs[3], 0)],
            "the next in turn, not org 1 again"
        );
        assert_eq!(queue.in_flight(), 3);
    }

    #[test]
    fn a_removed_endpoint_drops_the_due_jobs_and_frees_nothing_in_flight() {
        let (gone, kept) = (OrgId::generate(), OrgId::generate());
        let mut queue = FairQueue::new(Limits {
            per_org: 1,
            total: 10,
        });
        for n in 0..3 {
            queue.push(job(gone, n));
        }
        queue.push(job(kept, 0));
        assert_eq!(drain(&mut queue), [(gone, 0), (kept, 0)]);
        let dropped: Vec<u8> = queue.drop_org(gone).iter().map(|j| j.body[0]).collect();
        assert_eq!(dropped, [1, 2]);
        assert_eq!((queue.ready(), queue.in_flight()), (0, 2));
        queue.finished(gone);
        assert_eq!(queue.in_flight(), 1);
        queue.push(job(gone, 3));
        assert_eq!(
            drain(&mut queue),
            [(gone, 3)],
            "a new endpoint's jobs run again"
        );
        assert!(queue.drop_org(OrgId::generate()).is_empty());
    }
}
