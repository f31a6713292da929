//! Which of each organization's unfinished deliveries the dispatcher holds
//! in memory, and where the rest wait: in the outbox, read in order a
//! window at a time as slots free up (CONTRACT §9: memory does not grow
//! with the backlog).
//!
//! Each organization holds at most `window` jobs (due, waiting for a retry,
//! or in flight). Its jobs are read from the outbox in delivery-id order,
//! which is creation order, after a cursor: every job with an id up to the
//! cursor is held or finished, and only later ones may wait in the outbox.
//! A new job comes from a commit: it is held when there is room and nothing
//! waits before it, else it waits in the outbox and is read in its turn; one
//! whose id is at or before the cursor (committed after a job created later
//! than it) is held at once, since no read will reach it, unless a read
//! already found it (a commit is visible before it is announced).
//!
//! Once `SPILL_AFTER_WINDOWS` windows of an organization's jobs wait in the
//! outbox, the store is asked to move them, past the next window, out of
//! the database's memory ([`crate::storage::Store::spill`]). No job after
//! the cursor is held then (a job is held past the cursor only while
//! nothing waits), and no read runs meanwhile: a move and a read of one
//! organization never overlap.

use std::collections::{HashMap, HashSet};

use crate::domain::delivery::Job;
use crate::ids::{DeliveryId, OrgId};

/// How many windows of jobs may wait in the outbox before they are moved
/// out of the database's memory.
const SPILL_AFTER_WINDOWS: usize = 4;

#[derive(Debug, Default)]
struct OrgBacklog {
    /// Jobs held in memory: due, waiting for their retry, or in flight.
    held: HashSet<DeliveryId>,
    /// Every job with an id up to this one is held or finished.
    cursor: Option<DeliveryId>,
    /// Jobs after the cursor may wait in the outbox.
    on_disk: bool,
    /// A read of the outbox is under way.
    reading: bool,
    /// A job was left in the outbox while the read ran (the read may not
    /// have seen it).
    missed: bool,
    /// Jobs that finished while the read ran. The read may have taken
    /// their rows before their results deleted them: a job held by a commit
    /// after the read was sent, and finished before its answer came back.
    finished_while_reading: HashSet<DeliveryId>,
    /// Jobs left in the outbox since the last move out of memory.
    unspilled: usize,
    /// A move out of memory is under way.
    spilling: bool,
}

/// A read of the outbox to make: `limit` jobs of `org` after `after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read {
    /// The organization.
    pub org: OrgId,
    /// Jobs after this one.
    pub after: Option<DeliveryId>,
    /// At most this many.
    pub limit: usize,
}

/// A move of jobs out of the database's memory to make: those of `org`
/// after `after`, past the next `keep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spill {
    /// The organization.
    pub org: OrgId,
    /// Jobs after this one (none of them held).
    pub after: Option<DeliveryId>,
    /// This many stay, for the next read.
    pub keep: usize,
}

/// Per-organization windows over the outbox.
#[derive(Debug)]
pub struct Backlog {
    window: usize,
    /// Jobs left in the outbox that call for a move out of memory.
    spill_after: usize,
    orgs: HashMap<OrgId, OrgBacklog>,
}

impl Backlog {
    /// Windows of `window` jobs (at least 1).
    pub fn new(window: usize) -> Self {
        let window = window.max(1);
        Backlog {
            window,
            spill_after: window.saturating_mul(SPILL_AFTER_WINDOWS),
            orgs: HashMap::new(),
        }
    }

    /// Jobs an organization holds at most.
    pub fn window(&self) -> usize {
        self.window
    }

    /// At start: `jobs`, the first of `org`'s, are held; `more` wait after.
    pub fn restore(&mut self, org: OrgId, jobs: &[Job], more: bool) {
        let entry = self.orgs.entry(org).or_default();
        entry.held.extend(jobs.iter().map(|j| j.delivery_id));
        entry.cursor = jobs.iter().map(|j| j.delivery_id).max().max(entry.cursor);
        entry.on_disk |= more;
        if more {
            // However long it is: a move finds out.
            entry.unspilled = entry.unspilled.max(self.spill_after);
        }
    }

    /// A new durable job: whether to hold it now (else it waits in the
    /// outbox, or a read found it first and it is held already).
    pub fn admit(&mut self, job: &Job) -> bool {
        let window = self.window;
        let entry = self.orgs.entry(job.organization_id).or_default();
        let id = job.delivery_id;
        if entry.cursor.is_some_and(|cursor| id <= cursor) {
            return entry.held.insert(id);
        }
        if !entry.on_disk && entry.held.len() < window {
            entry.held.insert(id);
            entry.cursor = Some(id);
            return true;
        }
        entry.on_disk = true;
        entry.unspilled += 1;
        if entry.reading {
            entry.missed = true;
        }
        false
    }

    /// A new job a commit marked held under this node's lease: held,
    /// whatever the window (its room was set aside when the commit took
    /// it). Whether it was not held already.
    pub fn hold(&mut self, job: &Job) -> bool {
        let entry = self.orgs.entry(job.organization_id).or_default();
        entry.cursor = entry.cursor.max(Some(job.delivery_id));
        entry.held.insert(job.delivery_id)
    }

    /// Whether nothing of `org` waits in the outbox or is being read or
    /// moved: its new jobs may then be held at once, in order.
    pub fn quiet(&self, org: OrgId) -> bool {
        self.orgs
            .get(&org)
            .is_none_or(|entry| !entry.on_disk && !entry.reading && !entry.spilling)
    }

    /// The deliveries of `org` held now.
    pub fn held_ids(&self, org: OrgId) -> impl Iterator<Item = DeliveryId> + '_ {
        self.orgs
            .get(&org)
            .into_iter()
            .flat_map(|entry| entry.held.iter().copied())
    }

    /// How many more jobs `org` may hold.
    pub fn room(&self, org: OrgId) -> usize {
        let held = self.orgs.get(&org).map_or(0, |entry| entry.held.len());
        self.window.saturating_sub(held)
    }

    /// `org`'s held job `id` finished: its place is free.
    pub fn released(&mut self, org: OrgId, id: DeliveryId) {
        if let Some(entry) = self.orgs.get_mut(&org) {
            entry.held.remove(&id);
            if entry.reading {
                entry.finished_while_reading.insert(id);
            }
            if entry.held.is_empty() && !entry.on_disk && !entry.reading && !entry.spilling {
                self.orgs.remove(&org);
            }
        }
    }

    /// The read `org` needs now, if any: jobs wait in the outbox, none is
    /// being read, and a quarter of the window (at least one place) is free.
    pub fn next_read(&mut self, org: OrgId) -> Option<Read> {
        let window = self.window;
        let entry = self.orgs.get_mut(&org)?;
        let room = window.saturating_sub(entry.held.len());
        if !entry.on_disk || entry.reading || entry.spilling || room == 0 || room < window / 4 {
            return None;
        }
        entry.reading = true;
        entry.missed = false;
        Some(Read {
            org,
            after: entry.cursor,
            limit: room,
        })
    }

    /// The read `read` returned `jobs`: they are held now (the cursor moves
    /// past them); the outbox is caught up when fewer came than asked and
    /// nothing was left there meanwhile. Returns those neither held already
    /// nor finished while the read ran.
    pub fn read_done(&mut self, read: Read, jobs: Vec<Job>) -> Vec<Job> {
        let Some(entry) = self.orgs.get_mut(&read.org) else {
            return Vec::new();
        };
        entry.reading = false;
        entry.cursor = jobs.iter().map(|j| j.delivery_id).max().max(entry.cursor);
        if jobs.len() < read.limit && !entry.missed {
            entry.on_disk = false;
        }
        entry.missed = false;
        let finished = std::mem::take(&mut entry.finished_while_reading);
        let jobs: Vec<Job> = jobs
            .into_iter()
            .filter(|job| !finished.contains(&job.delivery_id))
            .filter(|job| entry.held.insert(job.delivery_id))
            .collect();
        if entry.held.is_empty() && !entry.on_disk {
            self.orgs.remove(&read.org);
        }
        jobs
    }

    /// The move out of memory `org` needs now, if any: enough jobs were
    /// left in the outbox since the last, and no read or move runs.
    pub fn next_spill(&mut self, org: OrgId) -> Option<Spill> {
        let entry = self.orgs.get_mut(&org)?;
        if !entry.on_disk || entry.reading || entry.spilling || entry.unspilled < self.spill_after {
            return None;
        }
        entry.spilling = true;
        entry.unspilled = 0;
        Some(Spill {
            org,
            after: entry.cursor,
            keep: self.window,
        })
    }

    /// `org`'s move is over (done or failed); `more` could move at once.
    pub fn spill_done(&mut self, org: OrgId, more: bool) {
        if let Some(entry) = self.orgs.get_mut(&org) {
            entry.spilling = false;
            if more {
                entry.unspilled = entry.unspilled.max(self.spill_after);
            }
        }
    }

    /// A failed move of `org` is due again, however few jobs came since.
    pub fn spill_again(&mut self, org: OrgId) {
        if let Some(entry) = self.orgs.get_mut(&org) {
            entry.unspilled = entry.unspilled.max(self.spill_after);
        }
    }

    /// More of `org`'s jobs wait in the outbox: committed by another node,
    /// or under a lease just claimed.
    pub fn more_on_disk(&mut self, org: OrgId) {
        let entry = self.orgs.entry(org).or_default();
        entry.on_disk = true;
        if entry.reading {
            entry.missed = true;
        }
    }

    /// `org`'s jobs are no longer this node's to deliver: forgotten.
    pub fn forget(&mut self, org: OrgId) {
        self.orgs.remove(&org);
    }

    /// Whether `org` holds no job and none waits for it.
    pub fn idle(&self, org: OrgId) -> bool {
        !self.orgs.contains_key(&org)
    }

    /// The read `read` failed: it is tried again later.
    pub fn read_failed(&mut self, read: Read) {
        if let Some(entry) = self.orgs.get_mut(&read.org) {
            entry.reading = false;
            entry.finished_while_reading.clear();
        }
    }

    /// Organizations with jobs waiting in the outbox.
    pub fn waiting(&self) -> impl Iterator<Item = OrgId> + '_ {
        self.orgs
            .iter()
            .filter(|(_, entry)| entry.on_disk)
            .map(|(org, _)| *org)
    }

    /// Jobs held in memory, over all organizations.
    pub fn held(&self) -> usize {
        self.orgs.values().map(|entry| entry.held.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventKind;

    fn release(backlog: &mut Backlog, jobs: &[Job]) {
        for job in jobs {
            backlog.released(job.organization_id, job.delivery_id);
        }
    }

    /// A window of 2 held and released while a third job waited, and the
    /// read that follows, with the next job not committed yet.
    fn reading_after_a_window() -> (Backlog, Vec<Job>, Read) {
        let org = OrgId::generate();
        let mut backlog = Backlog::new(2);
        let all = jobs(org, 4);
        assert!(backlog.admit(&all[0]) && backlog.admit(&all[1]));
        assert!(!backlog.admit(&all[2]));
        release(&mut backlog, &all[..2]);
        let Some(read) = backlog.next_read(org) else {
            panic!("a read")
        };
        (backlog, all, read)
    }

    fn jobs(org: OrgId, n: usize) -> Vec<Job> {
        (0..n)
            .map(|_| Job::new(org, EventKind::TaskCreated, Vec::new()))
            .collect()
    }

    #[test]
    fn a_window_fills_then_the_rest_waits_and_is_read_in_order() {
        let org = OrgId::generate();
        let mut backlog = Backlog::new(4);
        let all = jobs(org, 10);
        let held: Vec<bool> = all.iter().map(|j| backlog.admit(j)).collect();
        assert_eq!(
            held,
            [true, true, true, true, false, false, false, false, false, false]
        );
        assert_eq!(backlog.next_read(org), None, "no room yet");
        release(&mut backlog, &all[..1]);
        let read = backlog.next_read(org);
        assert_eq!(
            read,
            Some(Read {
                org,
                after: Some(all[3].delivery_id),
                limit: 1
            })
        );
        assert_eq!(backlog.next_read(org), None, "one read at a time");
        let Some(read) = read else { return };
        backlog.read_done(read, all[4..5].to_vec());
        assert_eq!(backlog.held(), 4);
        release(&mut backlog, &all[1..5]);
        let Some(read) = backlog.next_read(org) else {
            panic!("a read after the room freed")
        };
        assert_eq!((read.after, read.limit), (Some(all[4].delivery_id), 4));
        backlog.read_done(read, all[5..9].to_vec());
        release(&mut backlog, &all[5..9]);
        let Some(read) = backlog.next_read(org) else {
            panic!("the last job still waits")
        };
        backlog.read_done(read, all[9..10].to_vec());
        assert_eq!(backlog.next_read(org), None, "caught up");
        // Caught up: a new job is held at once again.
        assert!(backlog.admit(&jobs(org, 1)[0]));
    }

    #[test]
    fn a_job_left_in_the_outbox_during_a_read_is_not_forgotten() {
        let (mut backlog, all, read) = reading_after_a_window();
        let org = read.org;
        // Committed while the read runs; the read did not see it.
        assert!(!backlog.admit(&all[3]));
        backlog.read_done(read, all[2..3].to_vec());
        let Some(again) = backlog.next_read(org) else {
            panic!("the outbox is not caught up: all[3] waits")
        };
        assert_eq!(again.after, Some(all[2].delivery_id));
    }

    #[test]
    fn a_long_backlog_is_moved_out_of_memory_never_during_a_read() {
        let org = OrgId::generate();
        let mut backlog = Backlog::new(2);
        let all = jobs(org, 12);
        assert!(backlog.admit(&all[0]) && backlog.admit(&all[1]));
        for job in &all[2..9] {
            assert!(!backlog.admit(job));
        }
        assert_eq!(
            backlog.next_spill(org),
            None,
            "7 wait: fewer than 4 windows"
        );
        assert!(!backlog.admit(&all[9]));
        let spill = backlog.next_spill(org);
        assert_eq!(
            spill,
            Some(Spill {
                org,
                after: Some(all[1].delivery_id),
                keep: 2
            }),
            "after the cursor: nothing held is moved"
        );
        assert_eq!(backlog.next_spill(org), None, "one move at a time");
        release(&mut backlog, &all[..1]);
        assert_eq!(backlog.next_read(org), None, "no read during a move");
        backlog.spill_done(org, true);
        let Some(read) = backlog.next_read(org) else {
            panic!("a read once the move is over")
        };
        assert_eq!(backlog.next_spill(org), None, "no move during a read");
        backlog.read_done(read, all[2..3].to_vec());
        let Some(again) = backlog.next_spill(org) else {
            panic!("more could move: the next move follows")
        };
        assert_eq!(again.after, Some(all[2].delivery_id));
        backlog.spill_done(org, false);
        assert_eq!(backlog.next_spill(org), None, "nothing left to move");
        // A failed move is tried again when its timer says so.
        backlog.spill_again(org);
        assert!(backlog.next_spill(org).is_some());
    }

    #[test]
    fn a_job_a_read_found_before_its_commit_was_announced_is_held_once() {
        let (mut backlog, all, read) = reading_after_a_window();
        let org = read.org;
        // all[3] is committed and visible; the read finds it before the
        // commit's announcement reaches the dispatcher.
        let held = backlog.read_done(read, all[2..4].to_vec());
        assert_eq!(held.len(), 2);
        assert!(!backlog.admit(&all[3]), "held already: not twice");
        assert_eq!(backlog.held(), 2);
        let again = Read {
            org,
            after: None,
            limit: 2,
        };
        assert!(
            backlog.read_done(again, all[2..3].to_vec()).is_empty(),
            "a job held already is not handed out again"
        );
    }

    #[test]
    fn a_job_that_finished_while_a_read_ran_is_not_held_again_when_the_read_finds_it() {
        let (mut backlog, all, read) = reading_after_a_window();
        let org = read.org;
        // A commit held all[3] under this node's lease after the read was
        // sent; its attempt finished before the read answered, and the
        // read found its row before its result deleted it.
        assert!(backlog.hold(&all[3]));
        release(&mut backlog, &all[3..4]);
        let held = backlog.read_done(read, all[2..4].to_vec());
        assert_eq!(
            held.iter().map(|job| job.delivery_id).collect::<Vec<_>>(),
            vec![all[2].delivery_id],
            "the finished job is not handed out again"
        );
        assert_eq!(backlog.held(), 1);
        // Jobs finished before a later read are that read's concern no more.
        release(&mut backlog, &all[2..3]);
        backlog.more_on_disk(org);
        let Some(next) = backlog.next_read(org) else {
            panic!("a read")
        };
        assert_eq!(backlog.read_done(next, all[2..3].to_vec()).len(), 1);
    }

    #[test]
    fn a_job_committed_behind_the_cursor_is_held_at_once() {
        let org = OrgId::generate();
        let mut backlog = Backlog::new(1);
        let all = jobs(org, 3);
        // all[1] committed before all[0], which was created first.
        assert!(backlog.admit(&all[1]));
        assert!(
            backlog.admit(&all[0]),
            "behind the cursor: no read reaches it"
        );
        assert!(!backlog.admit(&all[2]), "the window is full");
        assert_eq!(backlog.held(), 2);
    }

    #[test]
    fn jobs_another_node_committed_are_read_and_an_empty_read_leaves_nothing() {
        let org = OrgId::generate();
        let mut backlog = Backlog::new(8);
        assert!(backlog.idle(org));
        backlog.more_on_disk(org);
        assert!(!backlog.idle(org));
        let Some(read) = backlog.next_read(org) else {
            panic!("a read")
        };
        // More committed while the read runs.
        backlog.more_on_disk(org);
        backlog.read_done(read, Vec::new());
        let Some(again) = backlog.next_read(org) else {
            panic!("read again: the first may have missed them")
        };
        backlog.read_done(again, Vec::new());
        assert!(backlog.idle(org), "nothing held, nothing waits");
        backlog.more_on_disk(org);
        backlog.forget(org);
        assert!(backlog.idle(org));
    }

    #[test]
    fn restored_windows_continue_after_their_last_job() {
        let (org, other) = (OrgId::generate(), OrgId::generate());
        let mut backlog = Backlog::new(3);
        let first = jobs(org, 3);
        backlog.restore(org, &first, true);
        let others = jobs(other, 1);
        backlog.restore(other, &others, false);
        assert_eq!(backlog.waiting().collect::<Vec<_>>(), [org]);
        release(&mut backlog, &first);
        let read = backlog.next_read(org);
        assert_eq!(read.map(|r| r.after), Some(Some(first[2].delivery_id)));
        let Some(read) = read else { return };
        backlog.read_failed(read);
        assert!(
            backlog.next_read(org).is_some(),
            "a failed read is tried again"
        );
        release(&mut backlog, &others);
        assert_eq!(backlog.held(), 0);
    }
}
