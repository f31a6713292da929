//! Which organizations this node delivers when the nodes share one queue:
//! the leases it holds, the ones it wants, and the ones it is giving up.
//! Bookkeeping only; the dispatcher runs the statements
//! ([`crate::storage::postgres::SharedQueue`]) and reports back here.
//!
//! A lease is trusted until `lease - margin` after the renewal that last
//! extended it was sent: the database's clock started counting no earlier,
//! and the margin leaves attempts started just before time to end before
//! another node may start the organization's next ones.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::ids::OrgId;
use crate::storage::postgres::Lease;

#[derive(Clone, Copy, Debug)]
struct Held {
    epoch: i64,
    /// Trusted until then.
    until: Instant,
}

/// This node's leases.
#[derive(Debug)]
pub struct Leases {
    held: HashMap<OrgId, Held>,
    /// Wanted, to claim in the next claim.
    wanted: HashSet<OrgId>,
    /// In the claim under way.
    claiming: HashSet<OrgId>,
    /// Being released; `true` when jobs of it came meanwhile.
    releasing: HashMap<OrgId, bool>,
    /// A look for abandoned leases is under way.
    looking: bool,
    /// A look waits for the claim or look under way to end.
    look_waiting: bool,
    renewing: bool,
    /// How long a lease is trusted after its renewal was sent.
    trusted: Duration,
}

impl Leases {
    /// No leases yet; each lasts `lease`, trusted for `lease - margin`.
    pub fn new(lease: Duration, margin: Duration) -> Self {
        Leases {
            held: HashMap::new(),
            wanted: HashSet::new(),
            claiming: HashSet::new(),
            releasing: HashMap::new(),
            looking: false,
            look_waiting: false,
            renewing: false,
            trusted: lease.saturating_sub(margin),
        }
    }

    /// The lease held on `org`.
    pub fn of(&self, org: OrgId) -> Option<Lease> {
        self.held.get(&org).map(|held| Lease {
            org,
            epoch: held.epoch,
        })
    }

    /// Jobs of `org` wait: its lease when held (read them now); else it is
    /// claimed next (or again once released).
    pub fn want(&mut self, org: OrgId) -> Option<Lease> {
        if let Some(lease) = self.of(org) {
            return Some(lease);
        }
        if let Some(again) = self.releasing.get_mut(&org) {
            *again = true;
        } else {
            // Also while a claim of it is under way: these jobs may have
            // been committed after that claim told the holder, whose read
            // then missed them; the next claim tells it again.
            self.wanted.insert(org);
        }
        None
    }

    /// The organizations to claim now, unless a claim or a look for
    /// abandoned leases is under way.
    ///
    /// A claim and a look never run at once: both may take the same free
    /// lease, one after the other under two epochs, and the holding under
    /// the first would be replaced by the second while its attempts are in
    /// flight; the second one's read would then take those rows again, and
    /// they would be delivered twice.
    pub fn take_claims(&mut self) -> Option<Vec<OrgId>> {
        if self.looking || !self.claiming.is_empty() || self.wanted.is_empty() {
            return None;
        }
        let orgs: Vec<OrgId> = self.wanted.drain().collect();
        self.claiming.extend(orgs.iter().copied());
        Some(orgs)
    }

    /// Whether a look for abandoned leases may start now: not while one
    /// runs, nor while a claim runs. It is then started when that one ends
    /// (see [`take_waiting_look`](Self::take_waiting_look)): a look asked
    /// for now may need to see what the one under way began too early to.
    pub fn start_look(&mut self) -> bool {
        if self.looking || !self.claiming.is_empty() {
            self.look_waiting = true;
            return false;
        }
        self.looking = true;
        true
    }

    /// The organizations whose leases this node holds or is releasing: a
    /// look leaves them alone, and takes any other lease naming this node.
    pub fn known(&self) -> Vec<OrgId> {
        self.held
            .keys()
            .chain(self.releasing.keys())
            .copied()
            .collect()
    }

    /// The look for abandoned leases ended (the claims wanted meanwhile
    /// may go).
    pub fn look_ended(&mut self) {
        self.looking = false;
    }

    /// Whether a look waited for the claim or look that just ended: start
    /// it now.
    pub fn take_waiting_look(&mut self) -> bool {
        std::mem::take(&mut self.look_waiting)
    }

    /// The claim sent at `sent` answered `got` (the others are another
    /// node's, which was told); answers the organizations whose earlier
    /// holding `got` replaced (see [`adopt`](Self::adopt)).
    pub fn claimed(&mut self, got: &[Lease], sent: Instant) -> Vec<OrgId> {
        self.claiming.clear();
        self.adopt(got, sent)
    }

    /// The claim failed: its organizations are claimed again later.
    pub fn claim_failed(&mut self) {
        let orgs: Vec<OrgId> = self.claiming.drain().collect();
        self.wanted.extend(orgs);
    }

    /// `got`, claimed by a statement sent at `sent`, are held. Answers the
    /// organizations held already under an older epoch (this node's earlier
    /// holding ran out and it claimed them anew): what was held under the
    /// old epoch must be dropped.
    ///
    /// A claim's answer may come after the answer of a later claim of the
    /// same lease (claims and looks run one at a time, see
    /// [`take_claims`](Self::take_claims), so this guards the bookkeeping
    /// rather than a known path): its epoch is then older than the one
    /// held, and it is ignored. Held
    /// under that stale epoch, the node's reads, renewals and release would
    /// all miss the lease, which would name it until it ran out, its jobs
    /// delivered by nobody meanwhile.
    pub fn adopt(&mut self, got: &[Lease], sent: Instant) -> Vec<OrgId> {
        let mut replaced = Vec::new();
        for lease in got {
            self.wanted.remove(&lease.org);
            let held = Held {
                epoch: lease.epoch,
                until: sent + self.trusted,
            };
            match self.held.get(&lease.org) {
                Some(newer) if newer.epoch > lease.epoch => {}
                Some(older) if older.epoch < lease.epoch => {
                    self.held.insert(lease.org, held);
                    replaced.push(lease.org);
                }
                _ => {
                    self.held.insert(lease.org, held);
                }
            }
        }
        replaced
    }

    /// Whether the lease on `org` is held and still trusted at `now`.
    pub fn trusted(&self, org: OrgId, now: Instant) -> bool {
        self.trusted_until(org).is_some_and(|until| until > now)
    }

    /// Until when the lease on `org` is trusted, if held.
    pub fn trusted_until(&self, org: OrgId) -> Option<Instant> {
        self.held.get(&org).map(|held| held.until)
    }

    /// The leases to renew now, unless a renewal is under way.
    pub fn take_renewal(&mut self) -> Option<Vec<Lease>> {
        if self.renewing || self.held.is_empty() {
            return None;
        }
        self.renewing = true;
        Some(self.all())
    }

    /// The renewal of `asked`, sent at `sent`, kept `kept`; answers the
    /// organizations lost (taken over while this node's lease had run out).
    pub fn renewed(&mut self, asked: &[Lease], kept: &[OrgId], sent: Instant) -> Vec<OrgId> {
        self.renewing = false;
        let kept: HashSet<OrgId> = kept.iter().copied().collect();
        let mut lost = Vec::new();
        for lease in asked {
            // Only the same holding: one released or claimed anew since is left alone.
            if self.of(lease.org) != Some(*lease) {
                continue;
            }
            if kept.contains(&lease.org) {
                if let Some(held) = self.held.get_mut(&lease.org) {
                    held.until = sent + self.trusted;
                }
            } else {
                self.held.remove(&lease.org);
                lost.push(lease.org);
            }
        }
        lost
    }

    /// The renewal failed (the leases are trusted until they run out).
    pub fn renewal_failed(&mut self) {
        self.renewing = false;
    }

    /// Leases no longer trusted at `now` (not renewed in time): given up.
    pub fn expired(&mut self, now: Instant) -> Vec<OrgId> {
        let lost: Vec<OrgId> = self
            .held
            .iter()
            .filter(|(_, held)| held.until <= now)
            .map(|(org, _)| *org)
            .collect();
        for org in &lost {
            self.held.remove(org);
        }
        lost
    }

    /// Starts releasing `orgs`' leases: answers them, to send.
    pub fn release(&mut self, orgs: impl IntoIterator<Item = OrgId>) -> Vec<Lease> {
        let mut leases = Vec::new();
        for org in orgs {
            if let Some(held) = self.held.remove(&org) {
                self.releasing.insert(org, false);
                leases.push(Lease {
                    org,
                    epoch: held.epoch,
                });
            }
        }
        leases
    }

    /// The release of `leases` ended (done or not: a lease not released
    /// runs out); those wanted meanwhile are claimed again.
    pub fn released(&mut self, leases: &[Lease]) {
        for lease in leases {
            if self.releasing.remove(&lease.org) == Some(true) {
                self.wanted.insert(lease.org);
            }
        }
    }

    /// Every lease held.
    pub fn all(&self) -> Vec<Lease> {
        self.held
            .iter()
            .map(|(org, held)| Lease {
                org: *org,
                epoch: held.epoch,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(30);
    const MARGIN: Duration = Duration::from_secs(10);

    fn lease(org: OrgId, epoch: i64) -> Lease {
        Lease { org, epoch }
    }

    #[test]
    fn a_wanted_organization_is_claimed_once_then_read_under_its_lease() {
        let (org, other) = (OrgId::generate(), OrgId::generate());
        let mut leases = Leases::new(LEASE, MARGIN);
        assert_eq!(leases.want(org), None);
        assert_eq!(leases.want(org), None);
        assert_eq!(leases.take_claims(), Some(vec![org]));
        assert_eq!(leases.want(other), None);
        assert_eq!(leases.take_claims(), None, "one claim at a time");
        leases.claimed(&[lease(org, 4)], Instant::now());
        assert_eq!(leases.want(org), Some(lease(org, 4)));
        assert_eq!(leases.take_claims(), Some(vec![other]));
        leases.claim_failed();
        assert_eq!(
            leases.take_claims(),
            Some(vec![other]),
            "a failed claim is tried again"
        );
    }

    #[test]
    fn jobs_that_come_while_their_claim_is_under_way_are_claimed_again_after_it() {
        let org = OrgId::generate();
        let mut leases = Leases::new(LEASE, MARGIN);
        leases.want(org);
        assert_eq!(leases.take_claims(), Some(vec![org]));
        // More jobs, committed after the claim told the node that holds it.
        assert_eq!(leases.want(org), None);
        assert_eq!(leases.take_claims(), None, "one claim at a time");
        leases.claimed(&[], Instant::now());
        assert_eq!(
            leases.take_claims(),
            Some(vec![org]),
            "the holder is told again"
        );
        // Claimed meanwhile: held, nothing more to claim.
        leases.want(org);
        leases.claimed(&[lease(org, 2)], Instant::now());
        assert_eq!(leases.take_claims(), None);
        assert_eq!(leases.want(org), Some(lease(org, 2)));
    }

    #[test]
    fn a_lease_is_trusted_until_its_margin_before_it_runs_out() {
        let org = OrgId::generate();
        let mut leases = Leases::new(LEASE, MARGIN);
        let sent = Instant::now();
        leases.adopt(&[lease(org, 1)], sent);
        assert!(leases.expired(sent + Duration::from_secs(19)).is_empty());
        let Some(asked) = leases.take_renewal() else {
            panic!("a renewal")
        };
        assert_eq!(leases.take_renewal(), None, "one renewal at a time");
        let renewed = sent + Duration::from_secs(15);
        assert!(leases.renewed(&asked, &[org], renewed).is_empty());
        assert!(leases.expired(sent + Duration::from_secs(30)).is_empty());
        assert_eq!(leases.expired(renewed + Duration::from_secs(20)), [org]);
        assert_eq!(leases.of(org), None);
    }

    #[test]
    fn a_lease_not_renewed_is_lost_unless_it_was_claimed_anew_meanwhile() {
        let (lost, anew) = (OrgId::generate(), OrgId::generate());
        let mut leases = Leases::new(LEASE, MARGIN);
        let now = Instant::now();
        leases.adopt(&[lease(lost, 1), lease(anew, 1)], now);
        let Some(asked) = leases.take_renewal() else {
            panic!("a renewal")
        };
        leases.adopt(&[lease(anew, 2)], now);
        let gone = leases.renewed(&asked, &[], now);
        assert_eq!(gone, [lost]);
        assert_eq!(leases.of(anew), Some(lease(anew, 2)));
    }

    #[test]
    fn a_lease_claimed_anew_under_another_epoch_replaces_the_old_holding() {
        let org = OrgId::generate();
        let mut leases = Leases::new(LEASE, MARGIN);
        let now = Instant::now();
        assert!(leases.adopt(&[lease(org, 1)], now).is_empty());
        assert!(leases.adopt(&[lease(org, 1)], now).is_empty());
        assert_eq!(leases.adopt(&[lease(org, 2)], now), [org]);
        assert_eq!(leases.of(org), Some(lease(org, 2)));
        assert!(leases.trusted(org, now));
        assert!(!leases.trusted(org, now + LEASE));
    }

    #[test]
    fn a_claim_and_a_look_for_abandoned_leases_never_run_at_once() {
        let org = OrgId::generate();
        let mut leases = Leases::new(LEASE, MARGIN);
        // A look under way: claims wait for it.
        assert!(leases.start_look());
        assert!(!leases.start_look(), "one look at a time");
        leases.want(org);
        assert_eq!(leases.take_claims(), None, "no claim during a look");
        leases.look_ended();
        assert_eq!(leases.take_claims(), Some(vec![org]));
        // A claim under way: the look waits for it, then goes.
        assert!(!leases.start_look(), "no look during a claim");
        leases.claimed(&[], Instant::now());
        assert!(leases.take_waiting_look());
        assert!(!leases.take_waiting_look(), "started once");
        assert!(leases.start_look());
    }

    #[test]
    fn a_look_asked_for_while_one_runs_goes_after_it() {
        let mut leases = Leases::new(LEASE, MARGIN);
        assert!(leases.start_look());
        assert!(!leases.take_waiting_look(), "none asked for yet");
        assert!(!leases.start_look(), "one look at a time");
        leases.look_ended();
        assert!(leases.take_waiting_look(), "the one asked for goes next");
        assert!(!leases.take_waiting_look());
        assert!(leases.start_look());
    }

    #[test]
    fn the_known_leases_are_those_held_and_those_being_released() {
        let (kept, released, unknown) = (OrgId::generate(), OrgId::generate(), OrgId::generate());
        let mut leases = Leases::new(LEASE, MARGIN);
        leases.adopt(&[lease(kept, 1), lease(released, 2)], Instant::now());
        let releasing = leases.release([released]);
        let mut known = leases.known();
        known.sort();
        let mut expected = vec![kept, released];
        expected.sort();
        assert_eq!(known, expected);
        assert!(!known.contains(&unknown));
        leases.released(&releasing);
        assert_eq!(leases.known(), [kept]);
    }

    #[test]
    fn an_older_claims_answer_that_comes_last_leaves_the_newer_holding() {
        let org = OrgId::generate();
        let mut leases = Leases::new(LEASE, MARGIN);
        let now = Instant::now();
        // A look for abandoned leases took the lease under epoch 7, then a
        // claim took it again under epoch 8; the claim answered first.
        assert!(leases.adopt(&[lease(org, 8)], now).is_empty());
        assert!(
            leases.adopt(&[lease(org, 7)], now).is_empty(),
            "nothing held under epoch 8 is dropped"
        );
        assert_eq!(leases.of(org), Some(lease(org, 8)));
        let Some(asked) = leases.take_renewal() else {
            panic!("a renewal")
        };
        assert_eq!(
            asked,
            [lease(org, 8)],
            "renewed under the epoch the database has"
        );
    }

    #[test]
    fn jobs_that_come_while_a_lease_is_released_claim_it_again_after() {
        let (org, quiet) = (OrgId::generate(), OrgId::generate());
        let mut leases = Leases::new(LEASE, MARGIN);
        leases.adopt(&[lease(org, 3), lease(quiet, 5)], Instant::now());
        let releasing = leases.release([org, quiet]);
        assert_eq!(releasing.len(), 2);
        assert_eq!(leases.want(org), None);
        assert_eq!(leases.take_claims(), None, "not before the release ends");
        leases.released(&releasing);
        assert_eq!(leases.take_claims(), Some(vec![org]));
        assert!(leases.all().is_empty());
    }
}
