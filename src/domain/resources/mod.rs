//! Workspace resources (CONTRACT §7): the sources of the seed's events.
//!
//! Each resource is one file: its record (which is also its REST
//! representation and its event `data`), its request bodies, and its pure
//! rules. Storage, listing and event emission are generic (see
//! `crate::workspace`).

pub mod analyses;
pub mod capsules;
pub mod decisions;
pub mod fields;
pub mod imports;
pub mod memories;
pub mod projects;
pub mod routes;
pub mod tasks;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::ids::ResourceId;
use crate::time::Timestamp;

/// A kind of workspace resource.
pub trait Resource: Serialize + DeserializeOwned + Clone + Send + 'static {
    /// Storage tag of the kind (unique per kind, never reused).
    const KIND: u8;
    /// Name used in 404 details.
    const NAME: &'static str;
    /// The resource's id.
    fn id(&self) -> ResourceId;
    /// Marks the resource as changed at `now` (its `updated_at`).
    fn touch(&mut self, now: Timestamp);
}
