//! Actors: one [`organization::OrganizationActor`] per organization
//! serializes that organization's commands (the [`registry::Registry`]
//! finds or starts it); the [`dispatcher::Dispatcher`], the
//! [`delivery::DeliveryActor`]s and the [`log::LogActor`] deliver what the
//! commit path hands them through [`handoff::Handoff`].

pub mod backlog;
pub mod delivery;
pub mod dispatcher;
pub mod fair_queue;
pub mod handoff;
pub mod log;
pub mod log_lengths;
pub mod messages;
pub mod organization;
pub mod registry;
