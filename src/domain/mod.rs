//! The domain: records, rules and commands. Pure logic, no I/O.

pub mod access;
pub mod audit;
pub mod commands;
pub mod delivery;
pub mod error;
pub mod event;
pub mod input;
pub mod member;
pub mod memo;
pub mod names;
pub mod org_state;
pub mod organization;
pub mod permissions;
pub mod resources;
pub mod role;
pub mod schema;
pub mod user;
pub mod webhook;
