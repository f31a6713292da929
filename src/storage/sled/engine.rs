//! The open database, and how it comes back after a failure.
//!
//! sled stops for good at its first I/O error (a full disk, a failing
//! device): it keeps the error (`Config::set_global_error` in sled 0.34)
//! and answers every later operation with it, and only opening the
//! database again clears it (`PageCache::start` calls
//! `reset_global_error`). Left alone, a full disk would need a restart.
//! So the first I/O error takes the database out of service
//! ([`Slot::failed`]): from then on every operation answers
//! [`StoreError::Unavailable`] at once (503 STORAGE_UNAVAILABLE), and a
//! recovery thread waits for the last user of the failed database to let
//! go (which releases sled's file lock), opens it again, and puts it back
//! in service once a probe write has been flushed. Writes the failed
//! database had taken but not flushed were not acknowledged: their writers
//! were told they may have been made (sled may have written them before
//! the failure, and then reads them back), and those sled had not written
//! are gone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::keys::{self, TreeName};
use super::Tuning;
use crate::storage::StoreError;

/// The database and its trees.
pub struct Engine {
    /// The database.
    pub db: ::sled::Db,
    /// Every tree, by [`TreeName::index`].
    pub trees: Vec<::sled::Tree>,
}

/// Where the database of the data directory `dir` lives.
pub fn database_path(dir: &Path) -> std::path::PathBuf {
    dir.join("db")
}

impl Engine {
    /// Opens the database under `dir`.
    pub fn open(dir: &Path, tuning: Tuning) -> Result<Self, ::sled::Error> {
        let db = ::sled::Config::new()
            .path(database_path(dir))
            .cache_capacity(tuning.cache_mb.max(1) * 1024 * 1024)
            .mode(::sled::Mode::HighThroughput)
            .open()?;
        let trees = TreeName::ALL
            .iter()
            .map(|t| db.open_tree(t.name()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Engine { db, trees })
    }

    /// The tree `name`.
    pub fn tree(&self, name: TreeName) -> &::sled::Tree {
        &self.trees[name.index()]
    }

    /// Writes and flushes a small record: whether the disk takes writes now.
    fn probe(&self) -> Result<(), ::sled::Error> {
        let now = crate::time::Timestamp::now().millis().to_be_bytes();
        self.tree(TreeName::Meta).insert(keys::PROBE, &now)?;
        self.db.flush()?;
        Ok(())
    }
}

/// Whether `err` means the engine itself failed (and must be reopened), as
/// opposed to a refused or malformed write.
pub fn is_io_failure(err: &StoreError) -> bool {
    match err {
        StoreError::Engine(cause) => cause
            .downcast_ref::<::sled::Error>()
            .is_some_and(|e| matches!(e, ::sled::Error::Io(_))),
        StoreError::Flush(_) => true,
        _ => false,
    }
}

/// The database in service, or why there is none.
pub struct Slot {
    dir: PathBuf,
    tuning: Tuning,
    engine: RwLock<Option<Arc<Engine>>>,
    /// Why the store is out of service, while it is.
    down: Mutex<Option<String>>,
    /// A recovery thread is running.
    recovering: AtomicBool,
    /// When a write or a probe last succeeded.
    last_write: Mutex<Instant>,
    /// Handed to the recovery thread, which must not keep the slot alive.
    this: Weak<Slot>,
}

/// A probe is written only when nothing else was this recently.
const PROBE_EVERY: Duration = Duration::from_secs(1);

impl Slot {
    /// A slot holding `engine`, opened from `dir` with `tuning`.
    pub fn new(dir: &Path, tuning: Tuning, engine: Engine) -> Arc<Slot> {
        Arc::new_cyclic(|this| Slot {
            dir: dir.to_owned(),
            tuning,
            engine: RwLock::new(Some(Arc::new(engine))),
            down: Mutex::new(None),
            recovering: AtomicBool::new(false),
            last_write: Mutex::new(Instant::now()),
            this: this.clone(),
        })
    }

    /// The database in service.
    pub fn current(&self) -> Result<Arc<Engine>, StoreError> {
        let engine = self
            .engine
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        engine.ok_or_else(|| self.unavailable())
    }

    /// Why there is no database in service.
    pub fn unavailable(&self) -> StoreError {
        let why = self.down.lock().unwrap_or_else(|e| e.into_inner()).clone();
        StoreError::Unavailable(why.unwrap_or_else(|| "the database is closed".into()))
    }

    /// Passes `result` on; an I/O failure of the engine takes it out of
    /// service first.
    pub fn check<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(err) = &result {
            self.note(err);
        }
        result
    }

    /// Takes the database out of service if `err` is an I/O failure of it.
    pub fn note(&self, err: &StoreError) {
        if is_io_failure(err) {
            self.failed(err);
        }
    }

    /// Notes a successful write.
    pub fn wrote(&self) {
        *self.last_write.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// Whether the store takes writes now: out of service, no; else yes if
    /// a write succeeded within the last second, or when a probe write is
    /// flushed now.
    pub fn ready(&self) -> Result<(), StoreError> {
        let engine = self.current()?;
        let recent = self
            .last_write
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
            < PROBE_EVERY;
        if recent {
            return Ok(());
        }
        let probed = engine.probe().map_err(StoreError::engine);
        drop(engine);
        self.check(probed)?;
        self.wrote();
        Ok(())
    }

    /// Takes the database out of service after `err` and starts reopening it.
    pub fn failed(&self, err: &StoreError) {
        let reason = crate::telemetry::cause_chain(err);
        let retired = self
            .engine
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        *self.down.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
        if retired.is_some() {
            tracing::error!(error = %reason, "storage failed; writes answer 503 until it is reopened");
        }
        if self.recovering.swap(true, Ordering::SeqCst) {
            return;
        }
        let slot = self.this.clone();
        let spawned = thread::Builder::new()
            .name("rolecall-recover".into())
            .spawn(move || recover(slot, retired));
        if let Err(err) = spawned {
            self.recovering.store(false, Ordering::SeqCst);
            tracing::error!(error = %err, "cannot start the storage recovery thread");
        }
    }

    /// Takes the database out of service for good and waits until it is
    /// released (its file lock included).
    pub fn close(&self) -> Result<(), StoreError> {
        let engine = self
            .engine
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        *self.down.lock().unwrap_or_else(|e| e.into_inner()) =
            Some("the database is closed".into());
        if let Some(engine) = engine {
            engine.db.flush().map_err(StoreError::engine)?;
            release(engine);
        }
        Ok(())
    }
}

/// Waits (a while) for the other users of `engine` to finish, then drops it.
fn release(engine: Arc<Engine>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Arc::strong_count(&engine) > 1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    drop(engine);
}

/// How long the failed database may take to be released before the log
/// says that only a restart will recover.
const RELEASE_PATIENCE: Duration = Duration::from_secs(60);

/// Reopens the database until it opens and a probe write is flushed; backs
/// off up to a second between tries. Ends when the store is gone.
///
/// The failed database is released on a thread of its own: dropping it
/// flushes, and sled can wait forever there (see `room`). Until it is
/// released its file lock stays, and every reopening fails; after
/// [`RELEASE_PATIENCE`] the log says so once.
fn recover(slot: Weak<Slot>, retired: Option<Arc<Engine>>) {
    let released = Arc::new(AtomicBool::new(retired.is_none()));
    if let Some(engine) = retired {
        let done = released.clone();
        let spawned = thread::Builder::new()
            .name("rolecall-release".into())
            .spawn(move || {
                release(engine);
                done.store(true, Ordering::SeqCst);
            });
        if let Err(err) = spawned {
            tracing::error!(error = %err, "cannot start the thread that releases the failed database");
        }
    }
    let started = Instant::now();
    let mut warned = false;
    let mut wait = Duration::from_millis(50);
    loop {
        if !warned && !released.load(Ordering::SeqCst) && started.elapsed() > RELEASE_PATIENCE {
            warned = true;
            tracing::error!(
                "the failed database has not been released after {} s (sled waits forever for a \
                 failed blob write); restart rolecall to recover",
                RELEASE_PATIENCE.as_secs()
            );
        }
        let Some(slot) = slot.upgrade() else {
            return;
        };
        let reopened = Engine::open(&slot.dir, slot.tuning).and_then(|engine| {
            engine.probe()?;
            Ok(engine)
        });
        match reopened {
            Ok(engine) => {
                *slot.engine.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(engine));
                *slot.down.lock().unwrap_or_else(|e| e.into_inner()) = None;
                slot.wrote();
                slot.recovering.store(false, Ordering::SeqCst);
                tracing::info!("storage recovered: the database is open and takes writes again");
                return;
            }
            Err(err) => {
                let reason = format!("reopening the database failed: {err}");
                tracing::debug!(error = %reason, "storage still unavailable");
                *slot.down.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
            }
        }
        drop(slot);
        thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_secs(1));
    }
}
