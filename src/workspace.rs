//! The generic way a workspace resource is stored, changed and deleted.
//!
//! Every change is one transaction holding the resource write and the
//! outbox writes of its events (staged by the organization's event sink),
//! made durable before the caller answers; the events' `data` is the
//! resource's REST representation (for a delete, the last one). Changes run
//! as transactional read-modify-write, so concurrent status moves of one
//! resource cannot both succeed.

use crate::domain::commands::json;
use crate::domain::error::ApiError;
use crate::domain::event::{Event, EventKind};
use crate::domain::org_state::OrgState;
use crate::domain::resources::Resource;
use crate::ids::ResourceId;
use crate::services::Services;
use crate::storage::codec::encode;
use crate::storage::Write;
use crate::time::Timestamp;

/// A resource after a change, with the events the change fires, in order.
pub struct Changed<T> {
    value: T,
    writes: Vec<Write>,
    events: Vec<Event>,
}

impl<T: Resource> Changed<T> {
    /// `value` as the result, firing nothing yet.
    pub fn new(value: T) -> Self {
        Changed {
            value,
            writes: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Fires `kind` with the value's representation as `data`.
    pub fn emit(mut self, kind: EventKind) -> Self {
        self.events.push(Event {
            kind,
            occurred_at: Timestamp::now(),
            data: json(&self.value),
        });
        self
    }

    /// Fires `kind` with explicit `data`.
    pub fn emit_data(mut self, kind: EventKind, data: serde_json::Value) -> Self {
        self.events.push(Event {
            kind,
            occurred_at: Timestamp::now(),
            data,
        });
        self
    }

    /// Also stores `other` (another resource), firing `kind` for it.
    pub fn also<U: Resource>(
        mut self,
        other: &U,
        kind: EventKind,
        org: &OrgState,
    ) -> Result<Self, ApiError> {
        self.writes.push(put(org, other)?);
        self.events.push(Event {
            kind,
            occurred_at: Timestamp::now(),
            data: json(other),
        });
        Ok(self)
    }

    /// Whether the change fires nothing and writes nothing else.
    fn is_quiet(&self) -> bool {
        self.writes.is_empty() && self.events.is_empty()
    }
}

fn put<T: Resource>(org: &OrgState, value: &T) -> Result<Write, ApiError> {
    Ok(Write::PutResource {
        org: org.id(),
        kind: T::KIND,
        id: value.id(),
        value: encode(value)?,
    })
}

/// Resource operations for one organization, as of one request.
pub struct Workspace<'a> {
    services: &'a Services,
    org: &'a OrgState,
}

impl<'a> Workspace<'a> {
    /// Operations on `org`'s resources.
    pub fn new(services: &'a Services, org: &'a OrgState) -> Self {
        Workspace { services, org }
    }

    /// A resource by id: 404 naming the kind when absent (or another org's).
    pub fn get<T: Resource>(&self, id: ResourceId) -> Result<T, ApiError> {
        self.services
            .storage
            .resource::<T>(self.org.id(), T::KIND, id)?
            .ok_or(ApiError::NotFound(T::NAME))
    }

    /// Stores a new resource and fires its events.
    pub async fn create<T: Resource>(&self, created: Changed<T>) -> Result<T, ApiError> {
        let mut writes = vec![put(self.org, &created.value)?];
        writes.extend(created.writes);
        writes.extend(self.services.events.stage(self.org, &created.events));
        let writes = self.services.storage.commit_durably(writes).await?;
        self.services.delivery.committed(&writes);
        Ok(created.value)
    }

    /// Changes a resource atomically: `change` sees its current value and
    /// returns the new one with its events, or refuses. A change that
    /// alters nothing and fires nothing writes nothing.
    pub async fn update<T: Resource + PartialEq>(
        &self,
        id: ResourceId,
        change: impl Fn(T) -> Result<Changed<T>, ApiError>,
    ) -> Result<T, ApiError> {
        let org = self.org;
        let (value, writes) = self.services.storage.transact(|tx| {
            let current: T = tx
                .resource(org.id(), T::KIND, id)?
                .ok_or(ApiError::NotFound(T::NAME))?;
            let changed = change(current.clone())?;
            if changed.value == current && changed.is_quiet() {
                return Ok((Vec::new(), (current, Vec::new())));
            }
            let mut writes = vec![put(org, &changed.value)?];
            writes.extend(changed.writes);
            writes.extend(self.services.events.stage(org, &changed.events));
            Ok::<_, ApiError>((writes.clone(), (changed.value, writes)))
        })?;
        if !writes.is_empty() {
            self.finish(writes).await?;
        }
        Ok(value)
    }

    /// Edits a resource with `apply`; when the result differs, it is
    /// touched and `event` (if any) fires. An edit that changes nothing
    /// writes and fires nothing.
    pub async fn edit<T: Resource + PartialEq>(
        &self,
        id: ResourceId,
        apply: impl Fn(&T) -> Result<T, ApiError>,
        event: Option<EventKind>,
    ) -> Result<T, ApiError> {
        self.update(id, |current: T| {
            let mut next = apply(&current)?;
            if next == current {
                return Ok(Changed::new(current));
            }
            next.touch(Timestamp::now());
            let changed = Changed::new(next);
            Ok(match event {
                Some(kind) => changed.emit(kind),
                None => changed,
            })
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
        let writes = self.services.storage.transact(|tx| {
            let current: T = tx
                .resource(org.id(), T::KIND, id)?
                .ok_or(ApiError::NotFound(T::NAME))?;
            let mut writes = vec![Write::DeleteResource {
                org: org.id(),
                kind: T::KIND,
                id,
            }];
            if let Some(kind) = event {
                let fired = Event {
                    kind,
                    occurred_at: Timestamp::now(),
                    data: json(&current),
                };
                writes.extend(self.services.events.stage(org, &[fired]));
            }
            Ok::<_, ApiError>((writes.clone(), writes))
        })?;
        self.finish(writes).await
    }

    /// Makes the writes of a committed change durable, then hands their
    /// delivery jobs to the dispatcher.
    async fn finish(&self, writes: Vec<Write>) -> Result<(), ApiError> {
        self.services
            .storage
            .durable()
            .await
            .map_err(ApiError::from)?;
        self.services.delivery.committed(&writes);
        Ok(())
    }
}
