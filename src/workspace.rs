//! Workspace resources of one organization, as seen by one request: reads
//! from the store, and changes through the commit path.
//!
//! Every change is one transaction holding the resource write and the
//! outbox writes of its events, durable before the caller answers; the
//! events' `data` is the resource's REST representation (for a delete, the
//! last one). Changes of an existing resource run as a transactional
//! read-modify-write, so concurrent status moves of one resource cannot
//! both succeed.

use crate::commit::{Commit, CommitPath};
use crate::domain::change::Write;
use crate::domain::error::ApiError;
use crate::domain::event::{Event, EventKind};
use crate::domain::org_state::OrgState;
use crate::domain::outbox;
use crate::domain::representation::representation;
use crate::domain::resources::{Changed, Resource};
use crate::ids::ResourceId;
use crate::storage::{Page, Store};
use crate::time::Timestamp;

/// Resource operations for one organization, as of one request.
pub struct Workspace<'a> {
    store: &'a Store,
    commit: &'a CommitPath,
    org: &'a OrgState,
}

impl<'a> Workspace<'a> {
    /// Operations on `org`'s resources.
    pub fn new(store: &'a Store, commit: &'a CommitPath, org: &'a OrgState) -> Self {
        Workspace { store, commit, org }
    }

    /// A resource by id: 404 naming the kind when absent (or another org's).
    pub async fn get<T: Resource>(&self, id: ResourceId) -> Result<T, ApiError> {
        self.store
            .resource::<T>(self.org.id(), id)
            .await?
            .ok_or(ApiError::NotFound(T::NAME))
    }

    /// One newest-first page of resources of kind `T`, before `before`, of
    /// `parent` when given.
    pub async fn page<T: Resource>(
        &self,
        before: Option<ResourceId>,
        limit: usize,
        parent: Option<ResourceId>,
    ) -> Result<Page<T>, ApiError> {
        Ok(self
            .store
            .resource_page::<T>(self.org.id(), before, limit, parent)
            .await?)
    }

    /// Stores a new resource and fires its events, answered with what
    /// `answer` makes of it: the answer, and a write to commit with the
    /// change (the answer's record under an idempotency key, if any).
    pub async fn create<T: Resource, A>(
        &self,
        created: Changed<T>,
        answer: impl FnOnce(&T) -> Result<(A, Option<Write>), ApiError>,
    ) -> Result<A, ApiError> {
        let (value, mut writes) = created.into_created_writes(self.org)?;
        let (answer, record) = answer(&value)?;
        writes.extend(record);
        self.commit.commit(Commit::writes(writes)).await?;
        Ok(answer)
    }

    /// Changes a resource atomically: `change` sees its current value and
    /// returns the new one with its events, or refuses. A change that
    /// alters nothing and fires nothing writes nothing.
    pub async fn update<T: Resource>(
        &self,
        id: ResourceId,
        change: impl Fn(T) -> Result<Changed<T>, ApiError>,
    ) -> Result<T, ApiError> {
        self.update_answered(id, change, |value: &T| Ok((value.clone(), None)))
            .await
    }

    /// [`Workspace::update`], answered with what `answer` makes of the
    /// resource's new value: the answer, and a write to commit with the
    /// change (the answer's record under an idempotency key, if any; it is
    /// committed even when the change alters nothing).
    pub async fn update_answered<T: Resource, A>(
        &self,
        id: ResourceId,
        change: impl Fn(T) -> Result<Changed<T>, ApiError>,
        answer: impl Fn(&T) -> Result<(A, Option<Write>), ApiError>,
    ) -> Result<A, ApiError> {
        let org = self.org;
        self.commit
            .update_resource(org.id(), id, |current: Option<T>| {
                let current = current.ok_or(ApiError::NotFound(T::NAME))?;
                let changed = change(current.clone())?;
                let (value, mut writes) = if changed.value() == &current && changed.is_quiet() {
                    (current, Vec::new())
                } else {
                    changed.into_writes(org)?
                };
                let (answer, record) = answer(&value)?;
                writes.extend(record);
                Ok((writes, answer))
            })
            .await
    }

    /// Deletes a resource, firing `event` (if any) with its last representation.
    pub async fn delete<T: Resource>(
        &self,
        id: ResourceId,
        event: Option<EventKind>,
    ) -> Result<(), ApiError> {
        let org = self.org;
        self.commit
            .update_resource(org.id(), id, |current: Option<T>| {
                let current = current.ok_or(ApiError::NotFound(T::NAME))?;
                let mut writes = vec![Write::DeleteResource(org.id(), T::KIND, id)];
                if let Some(kind) = event {
                    let fired = Event {
                        kind,
                        occurred_at: Timestamp::now(),
                        data: representation(&current)?,
                    };
                    writes.extend(outbox::stage(org, &[fired])?);
                }
                Ok((writes, ()))
            })
            .await
    }
}
