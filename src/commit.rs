//! The commit path: the one way a change becomes durable, visible and
//! delivered. Nothing else calls the store's write operations.
//!
//! Every change, in order:
//! 1. its writes are committed in one transaction (rows, audit record,
//!    outbox jobs and skipped-delivery records together);
//! 2. the commit is durable (group commit and fsync on sled);
//! 3. the new organization snapshot, and any account change, is published
//!    to the in-memory views, so the very next request sees it;
//! 4. its new deliveries are handed to the dispatcher, never before they
//!    are durable, and an endpoint removal drops the queued ones.
//!
//! A step that fails stops the path there: nothing is published or handed
//! on for a change that was not recorded. Delivery results take a shorter
//! path ([`CommitPath::record_attempts`]): their own transaction, durable
//! with the next shared flush, nothing published.

use std::sync::Arc;
use std::time::Instant;

use crate::admissions::Taken;
use crate::domain::change::Write;
use crate::domain::delivery::{Job, LogRecord, Stopped};
use crate::domain::org_state::{Edit, OrgState};
use crate::domain::resources::Resource;
use crate::ids::{OrgId, ResourceId};
use crate::state::accounts::AccountTable;
use crate::state::directory::Directory;
use crate::state::recent_checks::RecentChecks;
use crate::storage::{Durability, Freshness, Store, StoreError};

/// Where committed deliveries go: the dispatcher, and the delivery log's
/// bookkeeping. Implemented by the delivery actors.
pub trait Deliveries: Send + Sync {
    /// New deliveries about to be committed: marks those the dispatcher
    /// takes into memory at once, with no read of the outbox (on a queue
    /// several nodes share, see [`crate::admissions`]).
    fn take(&self, _writes: &mut [Write]) -> Option<Taken> {
        None
    }
    /// The commit of new deliveries seen by [`Deliveries::take`] failed,
    /// or its answer was lost: the room it took is given back, and its
    /// organizations' outbox read (or their leases claimed) in case it
    /// landed.
    fn not_committed(&self, _taken: Taken) {}
    /// New deliveries, now durable: schedule them.
    fn enqueue(&self, jobs: Vec<Job>);
    /// The endpoint of `org` was removed or disabled: drop its queued deliveries.
    fn endpoint_stopped(&self, org: OrgId, why: Stopped);
    /// Delivery-log records a change wrote (skipped events): count them,
    /// and consider their logs for pruning.
    fn logged(&self, records: &[&LogRecord]);
}

/// No dispatcher: deliveries stay in the outbox for a server to load.
struct Undelivered;

impl Deliveries for Undelivered {
    fn enqueue(&self, _: Vec<Job>) {}
    fn endpoint_stopped(&self, _: OrgId, _: Stopped) {}
    fn logged(&self, _: &[&LogRecord]) {}
}

/// A change to commit.
pub struct Commit {
    /// Its writes, applied in one transaction.
    pub writes: Vec<Write>,
    /// The organization snapshot it makes, published once durable.
    pub snapshot: Option<Arc<OrgState>>,
}

impl Commit {
    /// A change of these writes that makes no new organization snapshot.
    pub fn writes(writes: Vec<Write>) -> Self {
        Commit {
            writes,
            snapshot: None,
        }
    }
}

/// The commit path and the views it publishes to.
pub struct CommitPath {
    store: Store,
    directory: Arc<Directory>,
    accounts: Arc<AccountTable>,
    deliveries: Arc<dyn Deliveries>,
    /// The organizations' revisions as last read (by requests and delivery
    /// attempts), for attempts to reuse.
    recent: RecentChecks,
}

impl CommitPath {
    /// A commit path writing to `store`, publishing to `directory` and
    /// `accounts`, and handing deliveries to `deliveries`.
    pub fn new(
        store: Store,
        directory: Arc<Directory>,
        accounts: Arc<AccountTable>,
        deliveries: Arc<dyn Deliveries>,
    ) -> Self {
        CommitPath {
            store,
            directory,
            accounts,
            deliveries,
            recent: RecentChecks::default(),
        }
    }

    /// A commit path for a tool that writes a data directory no server is
    /// serving (the load tool's seeding): its views are its own, and no
    /// dispatcher is there to take deliveries, which wait in the outbox.
    pub fn offline(store: Store) -> Self {
        CommitPath::new(
            store,
            Arc::new(Directory::default()),
            Arc::new(AccountTable::default()),
            Arc::new(Undelivered),
        )
    }

    /// Commits `change`: one transaction, durable, published, delivered.
    /// A change that makes a snapshot moves its organization's revision
    /// to the snapshot's (refused, as [`StoreError::Stale`], when another
    /// node moved it first).
    pub async fn commit(&self, change: Commit) -> Result<(), StoreError> {
        let mut writes = change.writes;
        if let Some(snapshot) = &change.snapshot {
            writes.push(Write::OrgRevision(snapshot.id(), snapshot.revision));
        }
        let taken = self.deliveries.take(&mut writes);
        let writes = match self.store.commit(writes).await {
            Ok(writes) => writes,
            Err(err) => {
                if let Some(taken) = taken {
                    self.deliveries.not_committed(taken);
                }
                return Err(err);
            }
        };
        self.published(&writes, change.snapshot);
        Ok(())
    }

    /// The store, for reads.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The published snapshot of `org`.
    pub fn snapshot(&self, org: OrgId) -> Option<Arc<OrgState>> {
        self.directory.get(org)
    }

    /// The published snapshot of `org`, first reloaded when a store shared
    /// with other nodes holds a newer revision (or this node has not read
    /// the organization yet); `revision` is the stored one when the caller
    /// has just read it.
    pub async fn fresh_snapshot(
        &self,
        org: OrgId,
        revision: Option<u64>,
    ) -> Result<Option<Arc<OrgState>>, StoreError> {
        let published = self.directory.get(org);
        let current = match (&published, revision) {
            (Some(state), Some(stored)) => state.revision >= stored,
            (Some(_), None) => !self.store.shared(),
            (None, _) => false,
        };
        if current || !self.store.shared() {
            return Ok(published);
        }
        self.reload(org).await
    }

    /// `org`'s snapshot as it is now: on a store other nodes share, its
    /// stored revision is read first (a query shared with concurrent
    /// callers, or one asked less than
    /// [`crate::state::recent_checks::REUSE`] ago) and a snapshot behind it
    /// reloaded. For what must not act on an older state than another node
    /// answered, such as the secret a delivery attempt is signed with (see
    /// [`crate::state::recent_checks`] for why a recent read is enough).
    pub async fn current_snapshot(&self, org: OrgId) -> Result<Option<Arc<OrgState>>, StoreError> {
        if let Some(revision) = self.recent.revision(org, Instant::now()) {
            return self.fresh_snapshot(org, Some(revision)).await;
        }
        let Some(fresh) = self.freshness(None, Some(org)).await? else {
            return Ok(self.directory.get(org));
        };
        match fresh.revision {
            Some(revision) => self.fresh_snapshot(org, Some(revision)).await,
            None => Ok(None),
        }
    }

    /// Asks the shared store whether `token` is live and at which revision
    /// `org` is ([`Store::freshness`]; `None` on a store no other node
    /// shares). The revision read is kept for delivery attempts to reuse
    /// ([`RecentChecks`]), whichever request asked: an attempt that follows
    /// its event's request by a few milliseconds then makes no read of its
    /// own. Any read serves, since it is noted with the time it was asked,
    /// before its statement was sent.
    pub async fn freshness(
        &self,
        token: Option<&[u8; 32]>,
        org: Option<OrgId>,
    ) -> Result<Option<Freshness>, StoreError> {
        let asked = Instant::now();
        let fresh = self.store.freshness(token, org).await?;
        if let (Some(org), Some(revision)) = (org, fresh.as_ref().and_then(|f| f.revision)) {
            self.recent.note(org, asked, revision);
        }
        Ok(fresh)
    }

    /// Reads `org`'s state as stored now and publishes it (unless a newer
    /// one is published meanwhile): for a node whose snapshot is behind.
    pub async fn reload(&self, org: OrgId) -> Result<Option<Arc<OrgState>>, StoreError> {
        let Some(stored) = self.store.org_state(org).await? else {
            return Ok(None);
        };
        Ok(Some(self.directory.publish(Arc::new(stored))))
    }

    /// Reads one of `org`'s resources and commits what `decide` makes of
    /// it, in one transaction (concurrent changes of one resource cannot
    /// both succeed); durable and delivered before it returns. `decide` may
    /// run more than once, so it must not have effects.
    pub async fn update_resource<T, R, E>(
        &self,
        org: OrgId,
        id: ResourceId,
        decide: impl Fn(Option<T>) -> Result<(Vec<Write>, R), E>,
    ) -> Result<R, E>
    where
        T: Resource,
        E: From<StoreError>,
    {
        let (writes, outcome) = self.store.update_resource(org, id, decide).await?;
        if !writes.is_empty() {
            self.store.durable().await?;
            self.published(&writes, None);
        }
        Ok(outcome)
    }

    /// Records delivery results (log records and the outbox updates they
    /// imply) in one transaction of their own, after every batch before
    /// them, and answers once they are committed. The [`Durability`]
    /// resolves with the next flush, which they do not hurry: a batch the
    /// store lost with a failure is not counted as written, and the log
    /// actor writes it again. Nothing is published or handed on.
    pub async fn record_attempts(&self, writes: &[Write]) -> Result<Durability, StoreError> {
        self.store.append(writes).await
    }

    /// Deletes all but the newest `keep` records of `org`'s delivery log;
    /// returns how many remain.
    pub async fn prune_delivery_log(&self, org: OrgId, keep: usize) -> Result<usize, StoreError> {
        self.store.prune_delivery_log(org, keep).await
    }

    /// Deletes the `count` oldest records of `org`'s delivery log; returns
    /// how many it deleted.
    pub async fn trim_delivery_log(&self, org: OrgId, count: usize) -> Result<usize, StoreError> {
        self.store.trim_delivery_log(org, count).await
    }

    /// Steps 3 and 4, for a durable change.
    fn published(&self, writes: &[Write], snapshot: Option<Arc<OrgState>>) {
        if let Some(snapshot) = snapshot {
            self.directory.publish(snapshot);
        }
        self.accounts.apply(writes);
        let mut jobs = Vec::new();
        let mut logged = Vec::new();
        for write in writes {
            match write {
                Write::PutJob(job) => jobs.push(job.clone()),
                Write::Log(record) => logged.push(record),
                Write::Edit(Edit::DeleteWebhook(org)) => {
                    self.deliveries.endpoint_stopped(*org, Stopped::Removed)
                }
                Write::Edit(Edit::PutWebhook(endpoint)) if endpoint.disabled.is_some() => self
                    .deliveries
                    .endpoint_stopped(endpoint.organization_id, Stopped::Disabled),
                _ => {}
            }
        }
        if !logged.is_empty() {
            self.deliveries.logged(&logged);
        }
        if !jobs.is_empty() {
            self.deliveries.enqueue(jobs);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::domain::commands::roles::system_roles;
    use crate::domain::event::EventKind;
    use crate::domain::organization::{Organization, Plan};
    use crate::storage::Tuning;
    use crate::time::Timestamp;

    /// Records, when deliveries are handed on, what a reader could see.
    struct Witness {
        store: Store,
        directory: Arc<Directory>,
        org: OrgId,
        seen: Mutex<Vec<String>>,
    }

    impl Deliveries for Witness {
        fn enqueue(&self, jobs: Vec<Job>) {
            let Store::Sled(sled) = &self.store else {
                panic!("this test runs on sled")
            };
            let stored = sled.outbox_tree(self.org).unwrap_or_default();
            let published = self
                .directory
                .get(self.org)
                .is_some_and(|state| state.org.name == "Renamed");
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            for job in jobs {
                seen.push(format!(
                    "enqueue: stored {}, published {published}",
                    stored.contains(&job)
                ));
            }
        }
        fn endpoint_stopped(&self, _: OrgId, _: Stopped) {}
        fn logged(&self, _: &[&LogRecord]) {}
    }

    fn organization(now: Timestamp) -> (OrgState, Vec<Write>) {
        let org = Organization {
            id: OrgId::generate(),
            name: "Acme".into(),
            plan: Plan::Free,
            created_at: now,
            updated_at: now,
        };
        let (owner, member) = system_roles(org.id, now);
        let writes = vec![
            Write::Edit(Edit::PutRole(owner.clone())),
            Write::Edit(Edit::PutRole(member.clone())),
            Write::Edit(Edit::PutOrg(org.clone())),
        ];
        (
            OrgState::new(org, vec![owner, member], vec![], None),
            writes,
        )
    }

    #[test]
    fn a_change_is_durable_then_published_then_delivered_and_a_refused_one_goes_nowhere() {
        let Ok(dir) = tempfile::tempdir() else {
            panic!("no temp dir")
        };
        let Ok(store) = Store::open_sled(dir.path(), Tuning::default(), None) else {
            panic!("storage did not open")
        };
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            panic!("no runtime")
        };
        let now = Timestamp::now();
        let (state, writes) = organization(now);
        let directory = Arc::new(Directory::new(vec![]));
        let witness = Arc::new(Witness {
            store: store.clone(),
            directory: directory.clone(),
            org: state.id(),
            seen: Mutex::new(Vec::new()),
        });
        let path = CommitPath::new(
            store.clone(),
            directory.clone(),
            Arc::new(AccountTable::default()),
            witness.clone(),
        );
        let created = runtime.block_on(path.commit(Commit {
            writes,
            snapshot: Some(Arc::new(state.clone())),
        }));
        assert!(created.is_ok(), "{created:?}");

        // A rename that also queues a delivery.
        let mut renamed = state.org.clone();
        renamed.name = "Renamed".into();
        let edits = [Edit::PutOrg(renamed)];
        let next = Arc::new(state.apply(&edits));
        let job = Job::new(state.id(), EventKind::MemberAdded, b"{}".to_vec());
        let change = Commit {
            writes: vec![Write::Edit(edits[0].clone()), Write::PutJob(job)],
            snapshot: Some(next),
        };
        assert!(runtime.block_on(path.commit(change)).is_ok());
        let seen = witness.seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(seen, ["enqueue: stored true, published true"]);

        // A change storage refuses (deleting Member) publishes and queues nothing.
        let member = state
            .roles
            .values()
            .find(|r| r.is_system && !r.is_immutable);
        let Some(member) = member else {
            panic!("no Member role")
        };
        let mut refused_name = state.org.clone();
        refused_name.name = "Refused".into();
        let refused_edits = [
            Edit::PutOrg(refused_name),
            Edit::DeleteRole(state.id(), member.id),
        ];
        let refused_job = Job::new(state.id(), EventKind::MemberAdded, b"{}".to_vec());
        let refused = Commit {
            writes: refused_edits
                .iter()
                .cloned()
                .map(Write::Edit)
                .chain([Write::PutJob(refused_job.clone())])
                .collect(),
            snapshot: Some(Arc::new(state.apply(&refused_edits))),
        };
        let result = runtime.block_on(path.commit(refused));
        assert!(matches!(result, Err(StoreError::SystemRole)), "{result:?}");
        let name = directory.get(state.id()).map(|s| s.org.name.clone());
        assert_eq!(name.as_deref(), Some("Renamed"), "nothing published");
        let seen = witness.seen.lock().map(|s| s.len()).unwrap_or_default();
        assert_eq!(seen, 1, "nothing handed to the dispatcher");
        let stored = runtime
            .block_on(store.outbox_after(state.id(), None, usize::MAX))
            .unwrap_or_default();
        assert!(!stored.contains(&refused_job), "nothing stored");
    }
}
