//! Workspace resources (CONTRACT §7): the sources of the seed's events.
//!
//! Each resource is one file: its record (which is also its REST
//! representation and its event `data`), its request bodies, and its pure
//! rules. How a change to one is described (its new value and the events it
//! fires) is [`changed::Changed`]; the commit path stores it.

pub mod analyses;
pub mod capsules;
pub mod changed;
pub mod decisions;
pub mod fields;
pub mod imports;
pub mod memories;
pub mod projects;
pub mod tasks;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::ids::ResourceId;
use crate::time::Timestamp;

pub use changed::Changed;

/// Declares every kind of resource once: the [`ResourceKind`] tag and the
/// [`AnyResource`] that carries a value of any kind to storage.
macro_rules! resource_kinds {
    ($( $variant:ident($ty:ty) ),* $(,)?) => {
        /// A kind of workspace resource.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ResourceKind { $( #[doc = stringify!($ty)] $variant, )* }

        impl ResourceKind {
            /// Every kind.
            pub const ALL: &'static [ResourceKind] = &[$( ResourceKind::$variant, )*];

            /// Its name ([`Resource::NAME`]), as storage records it.
            pub fn name(self) -> &'static str {
                match self { $( ResourceKind::$variant => <$ty as Resource>::NAME, )* }
            }

            /// Runs `work` with this kind's type, for code generic over
            /// [`Resource`] that is handed a kind at run time.
            pub fn with_type<W: WithKind>(self, work: W) -> W::Output {
                match self { $( ResourceKind::$variant => work.run::<$ty>(), )* }
            }
        }

        /// A resource of any kind. It serializes exactly as the value it holds.
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum AnyResource { $( #[doc = stringify!($ty)] $variant($ty), )* }

        impl AnyResource {
            /// The kind of the value held.
            pub fn kind(&self) -> ResourceKind {
                match self { $( AnyResource::$variant(_) => ResourceKind::$variant, )* }
            }

            /// The id of the value held.
            pub fn id(&self) -> ResourceId {
                match self { $( AnyResource::$variant(value) => value.id(), )* }
            }

            /// The resource it belongs to, if any (see [`Resource::parent`]).
            pub fn parent(&self) -> Option<ResourceId> {
                match self { $( AnyResource::$variant(value) => value.parent(), )* }
            }
        }

        $(
            impl From<$ty> for AnyResource {
                fn from(value: $ty) -> Self {
                    AnyResource::$variant(value)
                }
            }
        )*
    };
}

resource_kinds! {
    Decision(decisions::Decision),
    Task(tasks::Task),
    Memory(memories::Memory),
    Capsule(capsules::Capsule),
    Project(projects::Project),
    Import(imports::Import),
    Analysis(analyses::Analysis),
}

/// Work generic over the type of a kind of resource
/// ([`ResourceKind::with_type`]).
pub trait WithKind {
    /// What the work gives.
    type Output;
    /// Does the work for the resources of type `T`.
    fn run<T: Resource>(self) -> Self::Output;
}

/// A kind of workspace resource.
pub trait Resource:
    Serialize + DeserializeOwned + Clone + PartialEq + Send + Into<AnyResource> + 'static
{
    /// The kind.
    const KIND: ResourceKind;
    /// Name used in 404 details.
    const NAME: &'static str;
    /// The resource's id.
    fn id(&self) -> ResourceId;
    /// Marks the resource as changed at `now` (its `updated_at`).
    fn touch(&mut self, now: Timestamp);
    /// The resource this one belongs to, for lists scoped to it (an
    /// import's project); `None` for top-level resources.
    fn parent(&self) -> Option<ResourceId> {
        None
    }
}
