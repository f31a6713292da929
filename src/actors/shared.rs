//! The dispatcher's state on a queue several nodes share (CONTRACT §8):
//! the leases it holds, the attempts in flight under each, the claims and
//! reads under way, and when a failed statement is sent again. What the
//! dispatcher does with it is in [`crate::actors::dispatcher`]'s sharing
//! part.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actors::backlog::Read;
use crate::actors::fair_queue::Limits;
use crate::actors::leases::Leases;
use crate::actors::read_first::ReadFirst;
use crate::actors::send_permits::{Gate, SendPermits};
use crate::actors::unwritten::Unwritten;
use crate::admissions::Admissions;
use crate::domain::delivery::Job;
use crate::ids::{DeliveryId, OrgId};
use crate::storage::postgres::{Lease, Listening, SharedQueue};

/// Organizations claimed at most per look for abandoned ones (more are
/// claimed by the next look, at once).
pub(crate) const ABANDONED_PER_LOOK: usize = 256;

/// The shortest interval between lease rounds.
pub(crate) const SHORTEST_ROUND: Duration = Duration::from_millis(10);

/// How often an organization claimed anew is looked at until what this
/// node did of it under an earlier holding is settled (see
/// [`crate::actors::unwritten`]).
pub(crate) const SETTLING_CHECK: Duration = Duration::from_millis(10);

/// The first wait before a failed lease statement is sent again, doubled
/// while they keep failing, up to [`LONGEST_RETRY`]: a blip of the database
/// costs a fraction of a second, not a lease round (CONTRACT §9:
/// deliveries resume within 2 s of the database's return).
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait before a failed lease statement is sent again.
const LONGEST_RETRY: Duration = Duration::from_secs(1);

/// How long an attempt not made for want of its organization's revision
/// waits before it starts again: well within CONTRACT §9's 2 s after the
/// database's return, and few enough checks while it is away.
pub(crate) const UNCHECKED_PAUSE: Duration = Duration::from_millis(500);
/// Attempts waiting for want of revisions are warned about at most this
/// often (each is a check that failed, many a second while the database
/// is away).
const UNCHECKED_WARN_EVERY: Duration = Duration::from_secs(10);

/// When to send a failed lease statement again.
#[derive(Debug)]
pub(in crate::actors) struct Retry {
    next: Duration,
}

impl Retry {
    fn new() -> Self {
        Retry { next: FIRST_RETRY }
    }

    /// The wait before the next try, after a failure.
    pub(in crate::actors) fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(LONGEST_RETRY);
        wait
    }

    /// A statement went through: the next failure starts over.
    pub(in crate::actors) fn succeeded(&mut self) {
        self.next = FIRST_RETRY;
    }
}

/// The dispatcher's state on a shared queue.
pub struct Shared {
    pub(in crate::actors) queue: SharedQueue,
    /// The leases this node holds, wants and gives up.
    pub(in crate::actors) leases: Leases,
    /// The lease each attempt in flight started under: one that finishes
    /// under a lease no longer held is an orphan, recorded and nothing more.
    pub(in crate::actors) in_flight: HashMap<DeliveryId, Lease>,
    /// Claims and looks under way (shutdown waits for them).
    pub(in crate::actors) pending: usize,
    /// Recorded outcomes not yet durable: a lease is given up, and read
    /// under anew, only once none of its organization's is left.
    pub(in crate::actors) unwritten: Arc<Unwritten>,
    /// Organizations claimed anew while attempts or outcomes of an earlier
    /// holding were unsettled: read once they are.
    pub(in crate::actors) settling: HashSet<OrgId>,
    /// Organizations with jobs handed to this node that it did not take
    /// from their notification: its next read of them takes those rows.
    pub(in crate::actors) handed_on_disk: HashSet<OrgId>,
    /// Handed jobs those reads took: their notifications, if they come
    /// after, are ignored.
    pub(in crate::actors) read_first: ReadFirst,
    /// Reads of waiting jobs to make, in the next claim of jobs.
    pub(in crate::actors) reads: Vec<(Read, Lease)>,
    /// A claim of jobs is under way.
    pub(in crate::actors) reading: bool,
    /// The connection listening for wake-ups, while the dispatcher runs.
    pub(in crate::actors) listening: Option<Listening>,
    /// Every lease was released at shutdown: nothing more is claimed.
    pub(in crate::actors) stopped: bool,
    /// The room offered to commits for new jobs held at once.
    pub(in crate::actors) admissions: Arc<Admissions>,
    /// When a failed claim, renewal or look is tried again.
    pub(in crate::actors) retry: Retry,
    /// Requests at the subscribers within the in-flight limits.
    pub(in crate::actors) permits: SendPermits,
    /// When attempts waiting for want of revisions were last warned about.
    unchecked_warned: Option<Instant>,
}

impl Shared {
    /// The state for delivering on `queue`.
    pub fn new(
        queue: SharedQueue,
        unwritten: Arc<Unwritten>,
        admissions: Arc<Admissions>,
        limits: Limits,
    ) -> Self {
        let lease = queue.lease();
        Shared {
            leases: Leases::new(lease, round(lease)),
            queue,
            in_flight: HashMap::new(),
            pending: 0,
            unwritten,
            settling: HashSet::new(),
            handed_on_disk: HashSet::new(),
            read_first: ReadFirst::default(),
            reads: Vec::new(),
            reading: false,
            listening: None,
            stopped: false,
            admissions,
            retry: Retry::new(),
            permits: SendPermits::new(limits),
            unchecked_warned: None,
        }
    }

    /// `job` is about to start at `now`: refused when its lease is no
    /// longer trusted (not renewed in time), else noted in flight, with the
    /// gate its request passes.
    pub fn start(&mut self, job: &Job, now: Instant) -> Option<Gate> {
        let org = job.organization_id;
        let until = self
            .leases
            .trusted_until(org)
            .filter(|until| *until > now)?;
        if let Some(lease) = self.leases.of(org) {
            self.in_flight.insert(job.delivery_id, lease);
        }
        Some(self.permits.gate(org, until))
    }

    /// An attempt of `job` ended: whether it started under a lease no
    /// longer held (an orphan).
    pub fn finished(&mut self, job: &Job) -> bool {
        let started = self.in_flight.remove(&job.delivery_id);
        matches!(started, Some(lease) if self.leases.of(job.organization_id) != Some(lease))
    }

    /// An attempt was not made at `now` because its organization's
    /// revision could not be read: warns (at most every
    /// [`UNCHECKED_WARN_EVERY`]) that attempts wait.
    pub fn unchecked(&mut self, now: Instant) {
        if self
            .unchecked_warned
            .is_some_and(|warned| now.duration_since(warned) < UNCHECKED_WARN_EVERY)
        {
            return;
        }
        self.unchecked_warned = Some(now);
        tracing::warn!(
            pause_ms = UNCHECKED_PAUSE.as_millis() as u64,
            "attempts wait: their organizations' revisions cannot be read from the database, \
             and another node may have changed their endpoints"
        );
    }

    /// Leases no longer trusted at `now`: given up.
    pub fn expired(&mut self, now: Instant) -> Vec<OrgId> {
        self.leases.expired(now)
    }
}

/// How often leases are renewed: three times per lease.
pub(crate) fn round(lease: Duration) -> Duration {
    (lease / 3).max(SHORTEST_ROUND)
}
