//! Actors: one [`organization::OrganizationActor`] per organization
//! serializes that organization's mutations; the [`registry::Registry`]
//! finds or starts it.

pub mod delivery;
pub mod dispatcher;
pub mod log;
pub mod log_lengths;
pub mod messages;
pub mod organization;
pub mod registry;
