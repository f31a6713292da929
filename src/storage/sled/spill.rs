//! The cold middle of a long backlog, kept out of sled (CONTRACT §9: memory
//! does not grow with the backlog).
//!
//! sled keeps about 100 bytes of page table for every page it has written,
//! evicted or not, and fills its page cache with the newest pages: a
//! million jobs queued in the outbox tree cost about 100 MiB of resident
//! memory at the default cache. So when an organization's backlog grows
//! long, the dispatcher has its jobs past the next window moved to a file
//! of the organization's own, appended to and read in order only. Its
//! outbox is then, in delivery-id order: the tree's head (jobs before the
//! file's next one), the file, and the tree's tail (jobs after the file's
//! last one); a read moves the file's jobs back into the tree as the head
//! runs out.
//!
//! Each file's committed length, read offset and next job are a record of
//! the spills tree, written in the sled transaction that removes the moved
//! jobs from the outbox (once the appended bytes are synced) or inserts the
//! jobs read back. Bytes past the committed length come from a move that
//! did not commit and are cut off at open; a file no record names is
//! removed then, and a drained file only once its record's removal is
//! flushed. So a crash neither loses a job nor delivers one twice more.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ::sled::transaction::ConflictableTransactionError;
use ::sled::IVec;
use serde::{Deserialize, Serialize};

use super::codec::{decode, encode};
use super::engine::Engine;
use super::keys::{self, TreeName};
use super::room::Room;
use super::write::{lift, lift_read, transaction, Aborted};
use crate::domain::delivery::Job;
use crate::ids::{DeliveryId, OrgId};
use crate::storage::{Spilled, StoreError};

/// Where the files are, under the data directory.
const DIRECTORY: &str = "spill";
/// A frame longer than this is corruption, not a job.
const MAX_FRAME: u32 = 64 * 1024 * 1024;
/// Bytes one move takes at most (after its first job): jobs may be large.
const MOVE_BYTES: u64 = 16 * 1024 * 1024;
/// Jobs one read-back moves at least (when the file has them): each ends
/// in a flush, so the next reads find theirs in the tree.
const READ_BACK_AT_LEAST: usize = 1024;

/// One organization's file, as committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Spill {
    /// Names the file: the first job moved into it.
    file: DeliveryId,
    /// The first job not read back yet.
    next: DeliveryId,
    /// The last job in the file: later ones are appended after it.
    last: DeliveryId,
    /// Where `next` starts.
    read_offset: u64,
    /// Bytes committed; what lies beyond comes from a move that did not commit.
    len: u64,
    /// Jobs not read back yet.
    count: u64,
}

/// A job that was to move out of the outbox was no longer there (a bug:
/// only jobs the dispatcher does not hold are moved).
#[derive(Debug, thiserror::Error)]
#[error("a job to move out of the outbox was no longer in it")]
struct Gone;

/// The files of a data directory, and the lock that keeps a move and a read
/// of them apart.
#[derive(Clone)]
pub struct Spills {
    dir: PathBuf,
    room: Room,
    lock: Arc<Mutex<()>>,
}

impl Spills {
    /// The files under `data_dir`, made consistent with `engine`'s records:
    /// uncommitted bytes cut off, files no record names removed. A record
    /// whose file is missing or short refuses the start (its jobs are gone).
    pub fn open(data_dir: &Path, room: Room, engine: &Engine) -> Result<Self, StoreError> {
        let dir = data_dir.join(DIRECTORY);
        super::create_private_dir(&dir)?;
        let spills = Spills {
            dir,
            room,
            lock: Arc::new(Mutex::new(())),
        };
        let records = records(engine)?;
        for entry in std::fs::read_dir(&spills.dir)? {
            let path = entry?.path();
            let named = records
                .iter()
                .find(|(org, spill)| path == spills.path(*org, spill.file));
            match named {
                Some((_, spill)) => cut(&path, spill.len)?,
                None => std::fs::remove_file(&path)?,
            }
        }
        for (org, spill) in &records {
            let path = spills.path(*org, spill.file);
            if !path.is_file() {
                return Err(missing(&path, "is missing"));
            }
        }
        Ok(spills)
    }

    fn path(&self, org: OrgId, file: DeliveryId) -> PathBuf {
        self.dir.join(format!("{org}-{file}.jobs"))
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves up to `max` of `org`'s jobs out of the outbox into its file:
    /// those after `after` past the first `keep` when it has no file yet,
    /// else those after the file's last. Every job after `after` must be
    /// one nobody holds.
    pub fn spill(
        &self,
        engine: &Engine,
        org: OrgId,
        after: Option<DeliveryId>,
        keep: usize,
        max: usize,
    ) -> Result<Spilled, StoreError> {
        let _moving = self.lock();
        let current = record(engine, org)?;
        let (from, skip) = match (&current, after) {
            // Appended after the file's last, and never at or before `after`.
            (Some(spill), after) => {
                let from = after.map_or(spill.last, |id| id.max(spill.last));
                (keys::job_after(org, from), 0)
            }
            (None, Some(id)) => (keys::job_after(org, id), keep),
            (None, None) => (org.as_bytes().to_vec(), keep),
        };
        let rows = engine
            .tree(TreeName::Outbox)
            .range(from..keys::past_org(org))
            .skip(skip);
        let (mut moving, mut bytes, mut more) = (Vec::new(), 0u64, false);
        for row in rows {
            if moving.len() == max || bytes >= MOVE_BYTES {
                more = true;
                break;
            }
            let (key, value) = row.map_err(StoreError::engine)?;
            bytes += 4 + value.len() as u64;
            moving.push((key, value));
        }
        let (Some((first, _)), Some((last, _))) = (moving.first(), moving.last()) else {
            return Ok(Spilled::default());
        };
        let (first, last) = (id_of(first)?, id_of(last)?);
        self.room.check(bytes)?;
        let file = current.as_ref().map_or(first, |spill| spill.file);
        let path = self.path(org, file);
        let committed = current.as_ref().map_or(0, |spill| spill.len);
        let len = append(&path, committed, moving.iter().map(|(_, v)| v))?;
        if current.is_none() {
            File::open(&self.dir)?.sync_all()?;
        }
        let moved = moving.len();
        let record = match current {
            Some(spill) => Spill {
                last,
                len,
                count: spill.count + moved as u64,
                ..spill
            },
            None => Spill {
                file,
                next: first,
                last,
                read_offset: 0,
                len,
                count: moved as u64,
            },
        };
        let value = encode(&record)?;
        // Should it not commit, the appended bytes lie past the committed
        // length (cut by the next move or at open), and a new file names no
        // record (removed at open).
        transaction::<(), StoreError>(
            &engine.trees,
            [TreeName::Outbox, TreeName::Spills],
            |views| {
                let outbox = views.tree(TreeName::Outbox).map_err(lift)?;
                for (key, _) in &moving {
                    if outbox.remove(key).map_err(lift_read)?.is_none() {
                        let gone = Aborted::Store(StoreError::engine(Gone));
                        return Err(ConflictableTransactionError::Abort(gone));
                    }
                }
                let spills = views.tree(TreeName::Spills).map_err(lift)?;
                spills
                    .insert(org.as_bytes(), value.as_slice())
                    .map_err(lift_read)?;
                Ok(())
            },
        )
        .map_err(Aborted::into_error)?;
        Ok(Spilled { moved, more })
    }

    /// Up to `limit` of `org`'s jobs after `after`, oldest first: the
    /// tree's head, then jobs read back from the file (moved into the tree,
    /// where finishing them deletes them), then the tail; and whether any
    /// were read back. Such a move is not flushed yet: the caller must make
    /// it durable before it hands the jobs out, or a database reopened
    /// after an I/O failure would forget that they left the file (and the
    /// move that put them there).
    pub fn read_after(
        &self,
        engine: &Engine,
        org: OrgId,
        after: Option<DeliveryId>,
        limit: usize,
    ) -> Result<(Vec<Job>, bool), StoreError> {
        let _reading = self.lock();
        let mut read_back = false;
        loop {
            let current = record(engine, org)?;
            let until = current.as_ref().map(|spill| spill.next);
            let jobs = engine.outbox_after(org, after, until, limit)?;
            match current {
                Some(spill) if jobs.len() < limit => {
                    let count = (limit - jobs.len()).max(READ_BACK_AT_LEAST);
                    self.read_back(engine, org, spill, count)?;
                    read_back = true;
                }
                _ => return Ok((jobs, read_back)),
            }
        }
    }

    /// Moves the file's next `count` jobs back into the outbox; the record
    /// goes once the file is read to its end, and the file after that.
    fn read_back(
        &self,
        engine: &Engine,
        org: OrgId,
        spill: Spill,
        count: usize,
    ) -> Result<(), StoreError> {
        let path = self.path(org, spill.file);
        let mut file = BufReader::new(File::open(&path)?);
        file.seek(SeekFrom::Start(spill.read_offset))?;
        let mut offset = spill.read_offset;
        let mut rows = Vec::new();
        let mut next = None;
        while offset < spill.len {
            let value = read_frame(&mut file)?;
            let job: Job = decode(&value)?;
            if rows.len() == count {
                next = Some(job.delivery_id);
                break;
            }
            offset += 4 + value.len() as u64;
            rows.push((keys::job(org, job.delivery_id), value));
        }
        self.room
            .check(rows.iter().map(|(_, v)| v.len() as u64).sum())?;
        let record = match next {
            Some(next) => Some(encode(&Spill {
                next,
                read_offset: offset,
                count: spill.count.saturating_sub(rows.len() as u64),
                ..spill
            })?),
            None => None,
        };
        transaction::<(), StoreError>(
            &engine.trees,
            [TreeName::Outbox, TreeName::Spills],
            |views| {
                let outbox = views.tree(TreeName::Outbox).map_err(lift)?;
                for (key, value) in &rows {
                    outbox
                        .insert(key.as_slice(), value.as_slice())
                        .map_err(lift_read)?;
                }
                let spills = views.tree(TreeName::Spills).map_err(lift)?;
                match &record {
                    Some(value) => spills.insert(org.as_bytes(), value.as_slice()),
                    None => spills.remove(org.as_bytes()),
                }
                .map_err(lift_read)?;
                Ok(())
            },
        )
        .map_err(Aborted::into_error)?;
        if record.is_none() {
            // Not before the record's removal is on disk: a crash would
            // bring the record back, naming a file that is gone.
            engine.db.flush().map_err(StoreError::engine)?;
            std::fs::remove_file(&path)?;
        }
        Ok(())
    }
}

/// Organizations with jobs in a file.
pub fn orgs(engine: &Engine) -> Result<Vec<OrgId>, StoreError> {
    Ok(records(engine)?.into_iter().map(|(org, _)| org).collect())
}

/// Jobs in files, over all organizations.
pub fn queued(engine: &Engine) -> Result<u64, StoreError> {
    Ok(records(engine)?.iter().map(|(_, spill)| spill.count).sum())
}

fn records(engine: &Engine) -> Result<Vec<(OrgId, Spill)>, StoreError> {
    engine
        .tree(TreeName::Spills)
        .iter()
        .map(|row| {
            let (key, value) = row.map_err(StoreError::engine)?;
            let org = OrgId::from_slice(&key).ok_or_else(|| StoreError::codec(BadKey))?;
            Ok((org, decode(&value)?))
        })
        .collect()
}

fn record(engine: &Engine, org: OrgId) -> Result<Option<Spill>, StoreError> {
    match engine
        .tree(TreeName::Spills)
        .get(org.as_bytes())
        .map_err(StoreError::engine)?
    {
        Some(value) => decode(&value).map(Some),
        None => Ok(None),
    }
}

/// A key of the spills or outbox tree that does not name what it should.
#[derive(Debug, thiserror::Error)]
#[error("a spill or outbox key is malformed")]
struct BadKey;

/// The delivery id of an outbox key.
fn id_of(key: &IVec) -> Result<DeliveryId, StoreError> {
    key.get(16..)
        .and_then(DeliveryId::from_slice)
        .ok_or_else(|| StoreError::codec(BadKey))
}

/// Writes `values` as frames (length, then bytes) at `committed`, dropping
/// whatever an uncommitted move left there, and syncs them; the new length.
fn append<'v>(
    path: &Path,
    committed: u64,
    values: impl Iterator<Item = &'v IVec>,
) -> Result<u64, StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    if file.metadata()?.len() < committed {
        return Err(missing(path, "is shorter than its committed length"));
    }
    file.set_len(committed)?;
    let mut out = BufWriter::new(file);
    out.seek(SeekFrom::Start(committed))?;
    let mut len = committed;
    for value in values {
        let frame = u32::try_from(value.len())
            .ok()
            .filter(|n| *n <= MAX_FRAME)
            .ok_or_else(|| StoreError::codec(BadFrame))?;
        out.write_all(&frame.to_le_bytes())?;
        out.write_all(value)?;
        len += 4 + u64::from(frame);
    }
    out.into_inner()
        .map_err(|err| err.into_error())?
        .sync_data()?;
    Ok(len)
}

/// A frame's length is beyond any job's.
#[derive(Debug, thiserror::Error)]
#[error("a spilled job's frame is malformed")]
struct BadFrame;

fn read_frame(file: &mut impl Read) -> Result<Vec<u8>, StoreError> {
    let mut len = [0u8; 4];
    file.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(StoreError::codec(BadFrame));
    }
    let mut value = vec![0u8; len as usize];
    file.read_exact(&mut value)?;
    Ok(value)
}

/// Cuts `path` to its committed `len`: what lies beyond was never committed.
fn cut(path: &Path, len: u64) -> Result<(), StoreError> {
    let file = OpenOptions::new().write(true).open(path)?;
    let size = file.metadata()?.len();
    if size < len {
        return Err(missing(path, "is shorter than its committed length"));
    }
    if size > len {
        file.set_len(len)?;
        file.sync_all()?;
    }
    Ok(())
}

/// A file the records name is not all there: its jobs are lost, and the
/// store is not opened on a guess.
fn missing(path: &Path, what: &str) -> StoreError {
    StoreError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "the backlog file {} {what}: restore the data directory from a backup",
            path.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::tests::open;
    use super::super::SledStore;
    use crate::domain::change::Write;
    use crate::domain::delivery::Job;
    use crate::domain::event::EventKind;
    use crate::ids::{DeliveryId, OrgId};
    use crate::storage::Spilled;

    /// `n` new jobs of `org`, committed, in creation order.
    fn queue(store: &SledStore, org: OrgId, n: usize) -> Vec<DeliveryId> {
        let jobs: Vec<Job> = (0..n)
            .map(|i| Job::new(org, EventKind::TaskCreated, format!("{{\"n\":{i}}}").into()))
            .collect();
        let ids = jobs.iter().map(|job| job.delivery_id).collect();
        let writes: Vec<Write> = jobs.into_iter().map(Write::PutJob).collect();
        assert!(store.append(&writes).is_ok());
        ids
    }

    /// Every job of `org`, read as the dispatcher does: `page` at a time
    /// after the last one read.
    async fn read_all(store: &SledStore, org: OrgId, page: usize) -> Vec<DeliveryId> {
        let mut read = Vec::new();
        loop {
            let Ok(jobs) = store.outbox_after(org, read.last().copied(), page).await else {
                panic!("a read of the outbox failed");
            };
            read.extend(jobs.iter().map(|job| job.delivery_id));
            if jobs.len() < page {
                return read;
            }
        }
    }

    fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir.join(super::DIRECTORY)) else {
            return Vec::new();
        };
        entries.filter_map(|e| e.ok().map(|e| e.path())).collect()
    }

    /// Jobs moved, and whether more could move.
    fn spill(store: &SledStore, org: OrgId, keep: usize, max: usize) -> (usize, bool) {
        match store.spill(org, None, keep, max) {
            Ok(Spilled { moved, more }) => (moved, more),
            Err(err) => panic!("the move failed: {err}"),
        }
    }

    fn queued(store: &SledStore) -> u64 {
        store.counts().map_or(u64::MAX, |counts| counts.deliveries)
    }

    #[tokio::test]
    async fn the_cold_middle_moves_out_and_is_read_back_in_order() {
        let Some(dir) = tempfile::tempdir().ok() else {
            return;
        };
        let store = open(dir.path());
        let (org, other) = (OrgId::generate(), OrgId::generate());
        let mut ids = queue(&store, org, 100);
        let others = queue(&store, other, 3);
        assert_eq!(spill(&store, org, 10, 60), (60, true));
        assert_eq!(spill(&store, org, 10, 60), (30, false));
        assert_eq!(files(dir.path()).len(), 1, "one file per organization");
        // Committed after the move: the tail, after the file's last job.
        ids.extend(queue(&store, org, 20));
        assert_eq!(queued(&store), 123, "the count includes the file's jobs");
        assert_eq!(spill(&store, org, 10, 60), (20, false));
        assert_eq!(
            spill(&store, org, 10, 60),
            (0, false),
            "nothing left to move"
        );
        assert_eq!(queued(&store), 123);

        assert_eq!(
            read_all(&store, org, 7).await,
            ids,
            "head, file, tail: in order"
        );
        assert_eq!(
            read_all(&store, other, 7).await,
            others,
            "another organization's untouched"
        );
        assert!(
            files(dir.path()).is_empty(),
            "a file read to its end is removed"
        );
        assert_eq!(queued(&store), 123, "read back, the jobs are in the outbox");
    }

    #[tokio::test]
    async fn a_crash_leaves_neither_uncommitted_bytes_nor_orphan_files() {
        let Some(dir) = tempfile::tempdir().ok() else {
            return;
        };
        let (org, ids) = {
            let store = open(dir.path());
            let org = OrgId::generate();
            let ids = queue(&store, org, 50);
            assert_eq!(spill(&store, org, 5, 100).0, 45);
            assert!(store.close().is_ok());
            (org, ids)
        };
        let Ok([file]) = <[_; 1]>::try_from(files(dir.path())) else {
            panic!("one file");
        };
        let committed = std::fs::metadata(&file).map_or(0, |m| m.len());
        // A move that synced its bytes but crashed before it committed, and
        // one that crashed before its file was named in any record.
        let torn = [std::fs::read(&file).unwrap_or_default(), b"torn".to_vec()].concat();
        assert!(std::fs::write(&file, torn).is_ok());
        let orphan = file.with_file_name(format!("{org}-{}.jobs", DeliveryId::generate()));
        assert!(std::fs::write(&orphan, b"orphan").is_ok());

        let store = open(dir.path());
        assert_eq!(std::fs::metadata(&file).map_or(0, |m| m.len()), committed);
        assert!(!orphan.exists(), "a file no record names is removed");
        assert_eq!(read_all(&store, org, 8).await, ids);
    }

    #[tokio::test]
    async fn an_organization_whose_jobs_are_all_in_its_file_has_a_window_at_start() {
        let Some(dir) = tempfile::tempdir().ok() else {
            return;
        };
        let store = open(dir.path());
        let org = OrgId::generate();
        let ids = queue(&store, org, 12);
        assert_eq!(spill(&store, org, 0, 100).0, 12);
        let Ok(windows) = store.outbox_windows(5).await else {
            panic!("the windows are read");
        };
        let [window] = &windows[..] else {
            panic!("one window: {}", windows.len());
        };
        let held: Vec<DeliveryId> = window.jobs.iter().map(|job| job.delivery_id).collect();
        assert_eq!((window.org, &held[..], window.more), (org, &ids[..5], true));
        assert_eq!(read_all(&store, org, 5).await[5..], ids[5..]);
    }

    #[test]
    fn a_move_stops_at_its_byte_budget_and_refuses_a_short_file() {
        let Some(dir) = tempfile::tempdir().ok() else {
            return;
        };
        let store = open(dir.path());
        let org = OrgId::generate();
        let big = vec![b'x'; 6 * 1024 * 1024];
        let jobs: Vec<Write> = (0..4)
            .map(|_| Write::PutJob(Job::new(org, EventKind::TaskCreated, big.clone())))
            .collect();
        assert!(store.append(&jobs).is_ok());
        assert_eq!(spill(&store, org, 0, 100), (3, true), "18 MiB: past 16");
        let Ok([file]) = <[_; 1]>::try_from(files(dir.path())) else {
            panic!("one file");
        };
        assert!(std::fs::write(&file, b"short").is_ok());
        let Err(err) = store.spill(org, None, 0, 100) else {
            panic!("appended to a file shorter than committed");
        };
        let message = crate::telemetry::cause_chain(&err);
        assert!(
            message.contains("shorter than its committed length"),
            "{message}"
        );
    }

    #[test]
    fn a_missing_file_refuses_the_start() {
        let Some(dir) = tempfile::tempdir().ok() else {
            return;
        };
        {
            let store = open(dir.path());
            let org = OrgId::generate();
            queue(&store, org, 4);
            assert_eq!(spill(&store, org, 1, 100).0, 3);
            assert!(store.close().is_ok());
        }
        for file in files(dir.path()) {
            assert!(std::fs::remove_file(file).is_ok());
        }
        // Tried again while the closed database may still hold its lock.
        let mut message = String::new();
        for _ in 0..50 {
            let Err(err) = SledStore::open(dir.path(), Default::default(), None) else {
                panic!("opened without the file");
            };
            message = crate::telemetry::cause_chain(&err);
            if message.contains("is missing") {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("not refused for the missing file: {message}");
    }
}
