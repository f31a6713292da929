//! The domain: records, rules and commands. Pure logic: no I/O, and no
//! knowledge of storage, HTTP or actors. Commands return domain values
//! (edits, audit records, events to stage); the commit path stores them.

pub mod access;
pub mod audit;
pub mod bytes;
pub mod change;
pub mod commands;
pub mod delivery;
pub mod error;
pub mod event;
pub mod idempotency;
pub mod input;
pub mod member;
pub mod memo;
pub mod names;
pub mod org_state;
pub mod organization;
pub mod outbox;
pub mod permissions;
pub mod representation;
pub mod resources;
pub mod role;
pub mod user;
pub mod webhook;
