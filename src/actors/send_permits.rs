//! Requests at the subscribers, within the in-flight limits, on a queue
//! several nodes share.
//!
//! There an attempt starts with a round trip to the database (its
//! organization's revision, so that a secret rotated on another node is
//! dead for it). Counted in flight from that check on, one organization's
//! 16 slots would each spend part of every attempt waiting on the
//! database, and a busy organization's deliveries would fall behind its
//! events. So the dispatcher starts up to twice the limits: an attempt
//! takes its place in its organization's line when it starts, checks, and
//! then holds a permit from its turn until its request ends. Checks overlap
//! other attempts' requests, requests start in the order their attempts
//! did, and the subscriber still sees at most `max_in_flight_per_org`
//! requests of the organization at once (and the node at most
//! `max_in_flight_total`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

use crate::actors::fair_queue::Limits;
use crate::ids::OrgId;

/// The permits of one node: one semaphore per organization with attempts
/// started, and one for all.
#[derive(Debug)]
pub struct SendPermits {
    per_org: usize,
    total: Arc<Semaphore>,
    orgs: HashMap<OrgId, Arc<Semaphore>>,
}

impl SendPermits {
    /// Permits for requests within `limits`.
    pub fn new(limits: Limits) -> Self {
        SendPermits {
            per_org: limits.per_org.max(1),
            total: Arc::new(Semaphore::new(limits.total.max(1))),
            orgs: HashMap::new(),
        }
    }

    /// The gate an attempt of `org` passes before its request, which it
    /// may pass until `trusted_until` (its lease's trust). Its place in the
    /// organization's line is taken now, so that requests start in the
    /// order their attempts did, whichever check answers first.
    pub fn gate(&mut self, org: OrgId, trusted_until: Instant) -> Gate {
        let per_org = self.per_org;
        let org = self
            .orgs
            .entry(org)
            .or_insert_with(|| Arc::new(Semaphore::new(per_org)))
            .clone();
        let mut waiting: Waiting = Box::pin(org.acquire_owned());
        // One poll queues it (tokio's semaphore serves its waiters in the
        // order they first asked); the attempt polls it again, with its own
        // waker, when its check is done.
        let polled = waiting
            .as_mut()
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        let in_line = match polled {
            Poll::Ready(permit) => InLine::Granted(permit.ok()),
            Poll::Pending => InLine::Waiting(waiting),
        };
        Gate {
            in_line,
            total: self.total.clone(),
            trusted_until,
        }
    }

    /// `org` has no attempt started: its semaphore goes (a later attempt
    /// gets a fresh one with every permit).
    pub fn forget(&mut self, org: OrgId) {
        self.orgs.remove(&org);
    }
}

/// A wait for an organization's permit, queued.
type Waiting = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// A request's place in its organization's line for a permit.
enum InLine {
    /// The permit, had at once (`None`: the semaphore was closed).
    Granted(Option<OwnedSemaphorePermit>),
    /// Waiting for it.
    Waiting(Waiting),
}

/// What an attempt waits for before its request.
pub struct Gate {
    in_line: InLine,
    total: Arc<Semaphore>,
    trusted_until: Instant,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("trusted_until", &self.trusted_until)
            .finish_non_exhaustive()
    }
}

/// The permits of one request, given back when dropped.
#[derive(Debug)]
pub struct Permits {
    _org: Option<OwnedSemaphorePermit>,
    _total: Option<OwnedSemaphorePermit>,
    /// How long the attempt waited for them.
    pub waited: Duration,
}

/// The lease the attempt started under is no longer trusted: another node
/// may have its organization now, so the request is not made.
#[derive(Debug, PartialEq, Eq)]
pub struct LeaseLapsed;

impl Gate {
    /// Waits for a permit of the organization's (in the order the attempts
    /// started), then one of the node's (in that order for every attempt, so
    /// no two wait on each other).
    pub async fn enter(self) -> Result<Permits, LeaseLapsed> {
        let asked = Instant::now();
        // The semaphores are never closed; if one were, the attempt goes on
        // without its permit rather than never.
        let org = match self.in_line {
            InLine::Granted(permit) => permit,
            InLine::Waiting(waiting) => waiting.await.ok(),
        };
        let total = self.total.acquire_owned().await.ok();
        let now = Instant::now();
        if now >= self.trusted_until {
            return Err(LeaseLapsed);
        }
        Ok(Permits {
            _org: org,
            _total: total,
            waited: now - asked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        per_org: 2,
        total: 3,
    };

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[tokio::test]
    async fn an_organization_sends_at_most_its_limit_at_once() {
        let mut permits = SendPermits::new(LIMITS);
        let org = OrgId::generate();
        let first = permits.gate(org, later()).enter().await;
        let second = permits.gate(org, later()).enter().await;
        assert!(first.is_ok() && second.is_ok());
        let third = permits.gate(org, later()).enter();
        tokio::pin!(third);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut third)
                .await
                .is_err(),
            "a third request of the organization waits"
        );
        drop(first);
        let third = tokio::time::timeout(Duration::from_secs(5), third).await;
        assert!(
            matches!(third, Ok(Ok(ref permits)) if permits.waited >= Duration::from_millis(50)),
            "the third goes once a permit is back, having waited: {third:?}"
        );
    }

    #[tokio::test]
    async fn requests_start_in_the_order_their_attempts_did() {
        let mut permits = SendPermits::new(Limits {
            per_org: 1,
            total: 8,
        });
        let org = OrgId::generate();
        let first = permits.gate(org, later()).enter().await;
        let second = permits.gate(org, later());
        let third = permits.gate(org, later());
        // The third's check answers first: it still waits for the second.
        let third = tokio::spawn(third.enter());
        tokio::task::yield_now().await;
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), second.enter()).await;
        assert!(matches!(second, Ok(Ok(_))), "the second goes first");
        assert!(!third.is_finished(), "the third waits for the second");
        drop(second);
        let third = tokio::time::timeout(Duration::from_secs(5), third).await;
        assert!(matches!(third, Ok(Ok(Ok(_)))), "then the third");
    }

    #[tokio::test]
    async fn the_node_sends_at_most_its_total_at_once() {
        let mut permits = SendPermits::new(LIMITS);
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(permits.gate(OrgId::generate(), later()).enter().await);
        }
        let fourth = permits.gate(OrgId::generate(), later()).enter();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), fourth)
                .await
                .is_err(),
            "a fourth request of the node waits, whatever its organization"
        );
    }

    #[tokio::test]
    async fn an_attempt_whose_lease_lapsed_while_it_waited_is_not_made() {
        let mut permits = SendPermits::new(LIMITS);
        let org = OrgId::generate();
        let lapsed = permits.gate(org, Instant::now()).enter().await;
        assert_eq!(lapsed.map(drop), Err(LeaseLapsed));
        let after = permits.gate(org, later()).enter().await;
        assert!(after.is_ok(), "its permits were given back");
        assert!(permits.gate(org, later()).enter().await.is_ok());
    }
}
