//! A workspace resource after a change, with the events the change fires:
//! what a resource command hands to the commit path.

use crate::domain::change::Write;
use crate::domain::error::ApiError;
use crate::domain::event::{Event, EventKind};
use crate::domain::org_state::OrgState;
use crate::domain::outbox;
use crate::domain::representation::representation;
use crate::domain::resources::{AnyResource, Resource};
use crate::time::Timestamp;

/// Where an event's `data` comes from.
#[derive(Clone, Debug, PartialEq)]
enum Data {
    /// The changed resource's representation.
    Value,
    /// The representation of `others[i]`.
    Other(usize),
    /// Given explicitly.
    Given(serde_json::Value),
}

/// An event named another resource that the change does not store.
#[derive(Debug, thiserror::Error)]
#[error("an event's data names a resource the change does not store")]
struct MissingOther;

/// A resource after a change, the other resources the change stores, and
/// the events it fires, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Changed<T> {
    value: T,
    others: Vec<AnyResource>,
    events: Vec<(EventKind, Data)>,
}

impl<T: Resource> Changed<T> {
    /// `value` as the result, firing nothing yet.
    pub fn new(value: T) -> Self {
        Changed {
            value,
            others: Vec::new(),
            events: Vec::new(),
        }
    }

    /// An edit of `current` into `next`: when they differ, `next` is
    /// touched and `event` (if any) fires; otherwise nothing changes and
    /// nothing fires.
    pub fn edited(current: T, mut next: T, event: Option<EventKind>) -> Self {
        if next == current {
            return Changed::new(current);
        }
        next.touch(Timestamp::now());
        let changed = Changed::new(next);
        match event {
            Some(kind) => changed.emit(kind),
            None => changed,
        }
    }

    /// The resource as changed.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// Fires `kind` with the value's representation as `data`.
    pub fn emit(mut self, kind: EventKind) -> Self {
        self.events.push((kind, Data::Value));
        self
    }

    /// Fires `kind` with explicit `data`.
    pub fn emit_data(mut self, kind: EventKind, data: serde_json::Value) -> Self {
        self.events.push((kind, Data::Given(data)));
        self
    }

    /// Also stores `other` (another resource), firing `kind` for it.
    pub fn also<U: Resource>(mut self, other: &U, kind: EventKind) -> Self {
        self.events.push((kind, Data::Other(self.others.len())));
        self.others.push(other.clone().into());
        self
    }

    /// Whether the change fires nothing and stores nothing else.
    pub fn is_quiet(&self) -> bool {
        self.others.is_empty() && self.events.is_empty()
    }

    /// The writes of this change in `org`: the resource, the others, and
    /// its events staged for delivery; and the resource.
    pub fn into_writes(self, org: &OrgState) -> Result<(T, Vec<Write>), ApiError> {
        self.writes(org, Write::PutResource)
    }

    /// The writes of this change when it creates its resource (a new id):
    /// the resource is inserted, not replaced ([`Write::NewResource`]).
    pub fn into_created_writes(self, org: &OrgState) -> Result<(T, Vec<Write>), ApiError> {
        self.writes(org, Write::NewResource)
    }

    fn writes(
        self,
        org: &OrgState,
        store: fn(crate::ids::OrgId, AnyResource) -> Write,
    ) -> Result<(T, Vec<Write>), ApiError> {
        let now = Timestamp::now();
        let mut events = Vec::with_capacity(self.events.len());
        for (kind, data) in self.events {
            let data = match data {
                Data::Value => representation(&self.value)?,
                Data::Other(i) => match self.others.get(i) {
                    Some(other) => representation(other)?,
                    None => return Err(ApiError::internal(MissingOther)),
                },
                Data::Given(data) => data,
            };
            events.push(Event {
                kind,
                occurred_at: now,
                data,
            });
        }
        let mut writes = Vec::with_capacity(1 + self.others.len() + events.len());
        writes.push(store(org.id(), self.value.clone().into()));
        writes.extend(
            self.others
                .into_iter()
                .map(|other| Write::PutResource(org.id(), other)),
        );
        writes.extend(outbox::stage(org, &events)?);
        Ok((self.value, writes))
    }
}
