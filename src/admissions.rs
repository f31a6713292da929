//! New jobs the commit path may hand straight to the dispatcher's memory
//! on a queue several nodes share, with no read of the outbox: those of
//! an organization whose lease this node holds and that is quiet here
//! (nothing of it waiting in the outbox, room in its window). The
//! dispatcher offers each such organization its room; a commit takes from
//! it and marks the rows held under the lease in their insert, so no read
//! takes them again. A commit that fails gives its room back, and in case
//! it landed after all its number is read again, and every organization
//! it had new jobs of is read (or its lease claimed): its other jobs are
//! in no node's memory either.
//!
//! The new jobs of an organization another node is known to hold (a lease
//! claim of this node's found it held, a short while ago) are marked for
//! that node to be told in the commit's own statement: its notification
//! goes out with the rows, and this node makes no claim just to tell it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use uuid::Uuid;

use crate::domain::change::Write;
use crate::domain::delivery::{HeldUnder, HolderTold};
use crate::ids::OrgId;
use crate::storage::postgres::LostReads;

/// One organization's offer.
#[derive(Debug, Default)]
struct Offer {
    /// The lease's epoch.
    epoch: i64,
    /// Jobs a commit may still take.
    left: usize,
    /// Jobs taken by commits whose jobs have not reached the dispatcher.
    in_transit: usize,
}

/// Another node's hold on an organization, as this node last learned it.
#[derive(Clone, Copy, Debug)]
struct Holder {
    told: HolderTold,
    /// Trusted until then (within the time the lease had left).
    until: Instant,
}

/// The offers, shared by the commit path and the dispatcher.
#[derive(Debug)]
pub struct Admissions {
    offers: Mutex<HashMap<OrgId, Offer>>,
    /// Organizations other nodes hold.
    holders: Mutex<HashMap<OrgId, Holder>>,
    numbers: Arc<LostReads>,
}

/// What one commit took, given back if it fails; and the organizations
/// of its new jobs, read (or their leases claimed) if it fails, since it
/// may have landed with no answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Taken {
    /// The commit's number, once it took a job.
    mark: Option<i64>,
    /// Organizations and how many jobs of each it took.
    taken: Vec<(OrgId, usize)>,
    /// Organizations of its other new jobs, in the outbox only.
    left: Vec<OrgId>,
}

impl Taken {
    /// The organizations with new jobs in the commit.
    pub fn orgs(&self) -> impl Iterator<Item = OrgId> + '_ {
        let taken = self.taken.iter().map(|(org, _)| *org);
        let left = self.left.iter().copied();
        taken.chain(left.filter(|org| self.taken.iter().all(|(taken, _)| taken != org)))
    }

    /// The commit's number, if it took a job.
    #[cfg(test)]
    fn mark(&self) -> Option<i64> {
        self.mark
    }
}

impl Admissions {
    /// No offers yet; commits are numbered by `numbers`, which also holds
    /// the numbers of commits that failed.
    pub fn new(numbers: Arc<LostReads>) -> Self {
        Admissions {
            offers: Mutex::new(HashMap::new()),
            holders: Mutex::new(HashMap::new()),
            numbers,
        }
    }

    /// Commit path: marks the new jobs among `writes` that their
    /// organizations' offers have room for as held under their leases, and
    /// the others of organizations another node holds for that node to be
    /// told. `None` when `writes` has no new job.
    pub fn take(&self, writes: &mut [Write]) -> Option<Taken> {
        self.mark_holders_told(writes);
        let mut offers = self.lock();
        let mut commit = Taken {
            mark: None,
            taken: Vec::new(),
            left: Vec::new(),
        };
        let mut any = false;
        for write in writes.iter_mut() {
            if write.new_job().is_none() {
                continue;
            }
            let Write::PutJob(job) = write else { continue };
            any = true;
            let org = job.organization_id;
            let offer = offers
                .get_mut(&org)
                .filter(|offer| job.held_under.is_none() && offer.left > 0);
            let Some(offer) = offer else {
                if job.held_under.is_none() && !commit.left.contains(&org) {
                    commit.left.push(org);
                }
                continue;
            };
            offer.left -= 1;
            offer.in_transit += 1;
            // One number for the commit, drawn once it marks a job.
            let mark = *commit.mark.get_or_insert_with(|| self.numbers.number());
            job.held_under = Some(HeldUnder {
                epoch: offer.epoch,
                mark,
            });
            job.holder_told = None;
            match commit.taken.iter_mut().find(|(taken, _)| *taken == org) {
                Some((_, count)) => *count += 1,
                None => commit.taken.push((org, 1)),
            }
        }
        any.then_some(commit)
    }

    /// The new jobs among `writes` of organizations another node holds,
    /// as far as this node knows now: marked for that node to be told.
    fn mark_holders_told(&self, writes: &mut [Write]) {
        let mut holders = lock(&self.holders);
        if holders.is_empty() {
            return;
        }
        let now = Instant::now();
        for write in writes.iter_mut() {
            if write.new_job().is_none() {
                continue;
            }
            let Write::PutJob(job) = write else { continue };
            let org = job.organization_id;
            match holders.get(&org) {
                Some(holder) if holder.until > now => job.holder_told = Some(holder.told),
                Some(_) => {
                    holders.remove(&org);
                }
                None => {}
            }
        }
    }

    /// Dispatcher: a claim found `org` held by `told.node`; commits tell
    /// that node of new jobs of `org` themselves until `until` (handing
    /// it the jobs when it takes them).
    pub fn held_elsewhere(&self, org: OrgId, told: HolderTold, until: Instant) {
        lock(&self.holders).insert(org, Holder { told, until });
    }

    /// Dispatcher: `node` stopped; the organizations it was known to hold,
    /// forgotten (their leases are free now).
    pub fn stopped(&self, node: Uuid) -> Vec<OrgId> {
        let mut holders = lock(&self.holders);
        let orgs: Vec<OrgId> = holders
            .iter()
            .filter(|(_, holder)| holder.told.node == node)
            .map(|(org, _)| *org)
            .collect();
        for org in &orgs {
            holders.remove(org);
        }
        orgs
    }

    /// Dispatcher, every lease round: drops the holders known no longer
    /// (commits drop those they meet; these are the others).
    pub fn forget_lapsed_holders(&self, now: Instant) {
        lock(&self.holders).retain(|_, holder| holder.until > now);
    }

    /// Dispatcher: this node holds `org` now (or its holder is in doubt):
    /// commits no longer tell another node of its jobs.
    pub fn not_held_elsewhere(&self, org: OrgId) {
        lock(&self.holders).remove(&org);
    }

    /// Commit path: the commit that took `taken` failed. Its room is given
    /// back; its rows are read again if it landed after all.
    pub fn failed(&self, taken: &Taken) {
        if let Some(mark) = taken.mark {
            self.numbers.failed(mark, Instant::now());
        }
        let mut offers = self.lock();
        for (org, count) in &taken.taken {
            if let Some(offer) = offers.get_mut(org) {
                offer.in_transit = offer.in_transit.saturating_sub(*count);
            }
        }
    }

    /// Dispatcher: a job taken for `org` arrived.
    pub fn arrived(&self, org: OrgId) {
        if let Some(offer) = self.lock().get_mut(&org) {
            offer.in_transit = offer.in_transit.saturating_sub(1);
        }
    }

    /// Dispatcher: `org`, held under `epoch`, has room for `room` more
    /// jobs (those in transit included).
    pub fn offer(&self, org: OrgId, epoch: i64, room: usize) {
        let mut offers = self.lock();
        let offer = offers.entry(org).or_default();
        offer.epoch = epoch;
        offer.left = room.saturating_sub(offer.in_transit);
    }

    /// Dispatcher: no more jobs of `org` go straight to memory (those in
    /// transit still arrive).
    pub fn withdraw(&self, org: OrgId) {
        let mut offers = self.lock();
        if let Some(offer) = offers.get_mut(&org) {
            offer.left = 0;
            if offer.in_transit == 0 {
                offers.remove(&org);
            }
        }
    }

    /// Dispatcher: withdraws `org`'s offer unless jobs taken by a commit
    /// are on their way; whether it did (the organization is idle here).
    pub fn withdraw_if_idle(&self, org: OrgId) -> bool {
        let mut offers = self.lock();
        match offers.get(&org) {
            Some(offer) if offer.in_transit > 0 => false,
            _ => {
                offers.remove(&org);
                true
            }
        }
    }

    /// Dispatcher: nothing more goes straight to memory (shutting down).
    pub fn withdraw_all(&self) {
        let mut offers = self.lock();
        offers.retain(|_, offer| {
            offer.left = 0;
            offer.in_transit > 0
        });
    }

    /// Jobs of `org` on their way from a commit.
    #[cfg(test)]
    fn in_transit(&self, org: OrgId) -> usize {
        self.lock().get(&org).map_or(0, |offer| offer.in_transit)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<OrgId, Offer>> {
        lock(&self.offers)
    }
}

/// The map behind `mutex`: it stays consistent whatever panicked while
/// holding it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::delivery::Job;
    use crate::domain::event::EventKind;

    fn new_jobs(org: OrgId, n: usize) -> Vec<Write> {
        (0..n)
            .map(|_| Write::PutJob(Job::new(org, EventKind::TaskCreated, b"{}".to_vec())))
            .collect()
    }

    /// What `mark` says of each job among `writes`.
    fn marks<T>(writes: &[Write], mark: impl Fn(&Job) -> Option<T>) -> Vec<Option<T>> {
        writes
            .iter()
            .map(|w| match w {
                Write::PutJob(job) => mark(job),
                _ => None,
            })
            .collect()
    }

    fn held(writes: &[Write]) -> Vec<Option<HeldUnder>> {
        marks(writes, |job| job.held_under)
    }

    #[test]
    fn a_commit_takes_what_the_offer_has_room_for_and_gives_it_back_on_failure() {
        let admissions = Admissions::new(Arc::default());
        let (org, other) = (OrgId::generate(), OrgId::generate());
        assert_eq!(admissions.take(&mut []), None, "no new job");
        let mut writes = new_jobs(org, 3);
        let Some(untaken) = admissions.take(&mut writes) else {
            panic!("new jobs, seen");
        };
        assert_eq!(untaken.mark(), None, "no offer, nothing taken");
        assert_eq!(
            untaken.orgs().collect::<Vec<_>>(),
            [org],
            "read if the commit fails"
        );
        assert_eq!(held(&writes), [None, None, None]);

        admissions.offer(org, 7, 2);
        let mut writes = new_jobs(org, 3);
        writes.extend(new_jobs(other, 1));
        let Some(taken) = admissions.take(&mut writes) else {
            panic!("nothing taken");
        };
        let marks = held(&writes);
        let Some(HeldUnder { mark, .. }) = marks[0] else {
            panic!("not held");
        };
        assert_eq!(
            marks,
            [
                Some(HeldUnder { epoch: 7, mark }),
                Some(HeldUnder { epoch: 7, mark }),
                None,
                None
            ]
        );
        assert_eq!(taken.mark(), Some(mark));
        assert_eq!(
            taken.orgs().collect::<Vec<_>>(),
            [org, other],
            "the organizations of the jobs taken, then of the others"
        );
        assert_eq!(admissions.in_transit(org), 2);

        // The room in transit counts against a new offer.
        admissions.offer(org, 7, 3);
        let mut more = new_jobs(org, 2);
        admissions.take(&mut more);
        assert_eq!(
            held(&more)[1],
            None,
            "one place left of 3 with 2 in transit"
        );

        admissions.failed(&taken);
        assert_eq!(admissions.in_transit(org), 1);
        assert_eq!(admissions.numbers.to_take_again(Instant::now()), [mark]);
    }

    #[test]
    fn a_withdrawn_offer_takes_nothing_but_its_jobs_in_transit_still_arrive() {
        let admissions = Admissions::new(Arc::default());
        let org = OrgId::generate();
        admissions.offer(org, 1, 10);
        let mut writes = new_jobs(org, 1);
        assert!(admissions.take(&mut writes).is_some());
        admissions.withdraw(org);
        let mut later = new_jobs(org, 1);
        assert_eq!(admissions.take(&mut later).and_then(|t| t.mark()), None);
        assert_eq!(admissions.in_transit(org), 1);
        admissions.arrived(org);
        assert_eq!(admissions.in_transit(org), 0);
        admissions.withdraw_all();
        assert!(admissions.lock().is_empty());
    }

    #[test]
    fn retries_and_marked_jobs_are_never_taken() {
        let admissions = Admissions::new(Arc::default());
        let org = OrgId::generate();
        admissions.offer(org, 1, 10);
        let mut retry = Job::new(org, EventKind::TaskCreated, b"{}".to_vec());
        retry.attempts_made = 1;
        let mut writes = vec![Write::PutJob(retry)];
        assert_eq!(admissions.take(&mut writes), None);
    }

    fn told(writes: &[Write]) -> Vec<Option<Uuid>> {
        marks(writes, |job| job.holder_told.map(|told| told.node))
    }

    /// `node`, taking handed jobs under epoch 4.
    fn holder(node: Uuid) -> HolderTold {
        HolderTold {
            node,
            handed: Some(4),
        }
    }

    #[test]
    fn new_jobs_of_an_organization_held_elsewhere_tell_its_holder_until_that_is_in_doubt() {
        let admissions = Admissions::new(Arc::default());
        let (org, other, gone) = (OrgId::generate(), OrgId::generate(), OrgId::generate());
        let (holder, now) = (Uuid::now_v7(), Instant::now());
        let later = now + std::time::Duration::from_secs(60);
        admissions.held_elsewhere(org, self::holder(holder), later);
        admissions.held_elsewhere(gone, self::holder(holder), now);

        let mut writes = new_jobs(org, 2);
        writes.extend(new_jobs(other, 1));
        writes.extend(new_jobs(gone, 1));
        let mut retry = Job::new(org, EventKind::TaskCreated, b"{}".to_vec());
        retry.attempts_made = 1;
        writes.push(Write::PutJob(retry));
        let Some(untaken) = admissions.take(&mut writes) else {
            panic!("new jobs, seen");
        };
        assert_eq!(untaken.mark(), None, "nothing held here");
        assert_eq!(untaken.orgs().collect::<Vec<_>>(), [org, other, gone]);
        assert_eq!(
            told(&writes),
            [Some(holder), Some(holder), None, None, None],
            "new jobs of the held organization only; not past the time trusted; no retry"
        );

        // Held here now: its new jobs are held, not told.
        admissions.offer(org, 3, 10);
        let mut writes = new_jobs(org, 1);
        assert!(admissions.take(&mut writes).is_some());
        assert_eq!(told(&writes), [None]);
        assert!(held(&writes)[0].is_some());

        admissions.withdraw(org);
        admissions.not_held_elsewhere(org);
        let elsewhere = Uuid::now_v7();
        admissions.held_elsewhere(gone, self::holder(elsewhere), later);
        admissions.held_elsewhere(other, self::holder(holder), later);
        assert_eq!(
            admissions.stopped(elsewhere),
            [gone],
            "its organizations only"
        );
        admissions.forget_lapsed_holders(now + std::time::Duration::from_secs(59));
        assert_eq!(lock(&admissions.holders).len(), 1, "a live holder kept");
        admissions.forget_lapsed_holders(now + std::time::Duration::from_secs(61));
        assert!(
            lock(&admissions.holders).is_empty(),
            "lapsed holders dropped"
        );
        let mut writes = new_jobs(org, 1);
        assert_eq!(admissions.take(&mut writes).and_then(|t| t.mark()), None);
        assert_eq!(told(&writes), [None], "the holder forgotten");
    }
}
