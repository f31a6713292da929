//! # rolecall
//!
//! A per-organization role catalog with server-side permission enforcement,
//! and signed webhook deliveries of workspace events.
//!
//! ```text
//! http/        request → extractor (token → user → OrgState → PermissionSet)
//!   │            reads: answered from the published snapshot, no locks held
//!   │            writes: Mutate message ─┐
//! actors/        OrganizationActor (one per org, serial):
//!                  domain::commands (pure: state, caller, input → Change)
//!                  storage::commit (one sled transaction: rows + audit + events)
//!                  await durability (group commit) → publish snapshot → answer
//! domain/      records, permission bitset, names, check order, commands
//! storage/     the only code that knows sled and bincode
//! directory    org snapshots read by every request
//! accounts     users and tokens (SHA-256 only)
//! ```
#![forbid(unsafe_code)]

pub mod accounts;
pub mod actors;
pub mod admin_cli;
pub mod cli;
pub mod config;
pub mod dashboard;
pub mod directory;
pub mod domain;
pub mod http;
pub mod ids;
pub mod load;
pub mod metrics;
pub mod secrets;
pub mod services;
pub mod startup;
pub mod storage;
pub mod telemetry;
pub mod time;
pub mod webhooks;
pub mod workspace;
