//! `rolecall storage copy`: a single-node installation moved into an empty
//! PostgreSQL database. Records are read through the source store's own
//! reads (what a server would load and page through), written into the
//! target in one transaction, and counted on both sides before it commits:
//! a copy that fails or does not match leaves the target empty.

use std::future::Future;
use std::pin::Pin;

use crate::domain::change::Write;
use crate::domain::org_state::Edit;
use crate::domain::resources::{Resource, ResourceKind, WithKind};
use crate::ids::OrgId;
use crate::storage::{Counts, Import, LogFilter, PgStore, Store, StoreError};

/// Records read and written per round.
const CHUNK: usize = 1000;

/// Why a copy was refused or undone.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The target already holds records.
    #[error(
        "the target database is not empty ({0}): storage copy fills a new database only, \
         for example one made with `createdb`"
    )]
    NotEmpty(String),
    /// What the target holds differs from what the source holds.
    #[error("the copy does not match its source, so nothing was committed: {0}")]
    Mismatch(String),
    /// A store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Copies every record of `from` into `to`, which must be empty; calls
/// `progress` with the records copied so far, out of `from`'s total
/// (which [`Store::counts`] gives). Answers what the target holds.
pub async fn copy(
    from: &Store,
    to: &PgStore,
    progress: impl FnMut(u64),
) -> Result<Counts, CopyError> {
    let expected = from.counts().await?;
    let import = to.import().await?;
    let found = import.counts().await?;
    if found.total() > 0 {
        return Err(CopyError::NotEmpty(nonzero(&found)));
    }
    let mut sink = Sink {
        import: &import,
        pending: Vec::with_capacity(CHUNK),
        copied: 0,
        progress,
    };
    let loaded = from.load().await?;
    for user in loaded.users {
        sink.push(Write::PutUser(user)).await?;
    }
    for token in loaded.tokens {
        sink.push(Write::PutToken(token)).await?;
    }
    if let Some(hash) = from.admin_token_hash().await? {
        sink.push(Write::AdminToken(hash)).await?;
    }
    let orgs: Vec<OrgId> = loaded.orgs.iter().map(|state| state.id()).collect();
    for state in loaded.orgs {
        sink.push(Write::Edit(Edit::PutOrg(state.org))).await?;
        for role in state.roles.into_values() {
            sink.push(Write::Edit(Edit::PutRole((*role).clone())))
                .await?;
        }
        for member in state.members.into_values() {
            sink.push(Write::Edit(Edit::PutMember((*member).clone())))
                .await?;
        }
        if let Some(webhook) = state.webhook {
            sink.push(Write::Edit(Edit::PutWebhook((*webhook).clone())))
                .await?;
        }
    }
    for org in orgs {
        copy_history(from, org, &mut sink).await?;
    }
    sink.flush().await?;
    let copied = import.counts().await?;
    if copied != expected {
        return Err(CopyError::Mismatch(differences(&expected, &copied)));
    }
    import.commit().await?;
    Ok(copied)
}

/// An organization's audit log, resources, unfinished deliveries and
/// delivery log, a page at a time.
async fn copy_history<F: FnMut(u64)>(
    from: &Store,
    org: OrgId,
    sink: &mut Sink<'_, F>,
) -> Result<(), CopyError> {
    let mut before = None;
    loop {
        let page = from.audit_page(org, before, CHUNK, None).await?;
        before = page.items.last().map(|record| record.id);
        for record in page.items {
            sink.push(Write::Audit(record)).await?;
        }
        if !page.more {
            break;
        }
    }
    for kind in ResourceKind::ALL {
        kind.with_type(CopyResources {
            from,
            org,
            sink: &mut *sink,
        })
        .await?;
    }
    // On sled, reading moves jobs of a backlog file back into the outbox
    // tree: the source keeps the same jobs, in order.
    let mut after = None;
    loop {
        let jobs = from.outbox_after(org, after, CHUNK).await?;
        let last_page = jobs.len() < CHUNK;
        after = jobs.last().map(|job| job.delivery_id);
        for job in jobs {
            sink.push(Write::PutJob(job)).await?;
        }
        if last_page {
            break;
        }
    }
    let mut before = None;
    loop {
        let page = from
            .delivery_log_page(org, before, CHUNK, LogFilter::default())
            .await?;
        before = page.items.last().map(|record| record.id);
        for record in page.items {
            sink.push(Write::Log(record)).await?;
        }
        if !page.more {
            break;
        }
    }
    Ok(())
}

/// Copies an organization's resources of one kind.
struct CopyResources<'a, 'i, F> {
    from: &'a Store,
    org: OrgId,
    sink: &'a mut Sink<'i, F>,
}

impl<'a, 'i, F: FnMut(u64)> WithKind for CopyResources<'a, 'i, F> {
    type Output = Pin<Box<dyn Future<Output = Result<(), CopyError>> + 'a>>;

    fn run<T: Resource>(self) -> Self::Output {
        Box::pin(async move {
            let mut before = None;
            loop {
                let page = self
                    .from
                    .resource_page::<T>(self.org, before, CHUNK, None)
                    .await?;
                before = page.items.last().map(Resource::id);
                for resource in page.items {
                    self.sink
                        .push(Write::PutResource(self.org, resource.into()))
                        .await?;
                }
                if !page.more {
                    return Ok(());
                }
            }
        })
    }
}

/// Writes in rounds of [`CHUNK`], counting them.
struct Sink<'i, F> {
    import: &'i Import,
    pending: Vec<Write>,
    copied: u64,
    progress: F,
}

impl<F: FnMut(u64)> Sink<'_, F> {
    async fn push(&mut self, write: Write) -> Result<(), StoreError> {
        self.pending.push(write);
        if self.pending.len() >= CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.import.write(&self.pending).await?;
        self.copied += self.pending.len() as u64;
        self.pending.clear();
        (self.progress)(self.copied);
        Ok(())
    }
}

/// The kinds `counts` holds records of, as "users: 3, admin tokens: 1".
fn nonzero(counts: &Counts) -> String {
    let held: Vec<String> = counts
        .named()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name}: {n}"))
        .collect();
    held.join(", ")
}

/// The kinds whose counts differ, as "roles: 12 in the source, 11 copied".
fn differences(expected: &Counts, copied: &Counts) -> String {
    let differ: Vec<String> = expected
        .named()
        .iter()
        .zip(copied.named())
        .filter(|((_, a), (_, b))| a != b)
        .map(|((name, a), (_, b))| format!("{name}: {a} in the source, {b} copied"))
        .collect();
    differ.join("; ")
}
