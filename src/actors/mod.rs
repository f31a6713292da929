//! Actors: one [`organization::OrganizationActor`] per organization
//! serializes that organization's commands (the [`registry::Registry`]
//! finds or starts it); the [`dispatcher::Dispatcher`], the
//! [`delivery::DeliveryActor`]s and the [`log::LogActor`] deliver what the
//! commit path hands them through [`handoff::Handoff`]; when several
//! nodes share one queue, the dispatcher delivers the organizations whose
//! leases it holds ([`shared`]).

pub mod backlog;
pub mod delivery;
pub mod dispatcher;
pub mod endpoint_health;
pub mod fair_queue;
pub mod handoff;
pub mod leases;
pub mod log;
pub mod log_lengths;
pub mod messages;
pub mod organization;
pub mod read_first;
pub mod registry;
pub mod role_expiry;
pub mod send_permits;
pub mod shared;
pub mod unwritten;
