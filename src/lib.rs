//! # rolecall
//!
//! A per-organization role catalog with server-side permission enforcement,
//! and signed webhook deliveries of workspace events.
//!
//! ## Where things are
//!
//! ```text
//! http/        routes per resource; extractors (token → user → snapshot → permissions);
//!              route_table: the key every organization route needs; problem+json
//! actors/      organization (one per org, serial commands), registry, dispatcher
//!              (fair_queue), delivery (attempts), log (delivery results), handoff
//! commit       THE COMMIT PATH: the only code that writes to the store
//! workspace    workspace resources of one org: store reads, changes via the commit path
//! accounts     user and token commands of the admin API, via the commit path
//! state/       in-memory views every request reads: directory (org snapshots), accounts
//! domain/      pure: records, permission sets, rules, commands → domain writes; no I/O,
//!              no storage, no HTTP, no actors
//! storage/     the async seam (Store); sled/ is the only code that knows sled and bincode
//! webhooks/    URL and address policy, signing, the outbound client, the webhook test
//! startup      wiring: each actor and handler gets narrow handles at construction
//! ```
//!
//! ## The path of one event
//!
//! ```text
//! POST /organizations/{org}/tasks
//!   http::extract::OrgAccess        token SHA-256 → user → OrgState snapshot → PermissionSet
//!   http::routes::tasks::create     route TASKS_CREATE allowed? body valid?
//!   domain::resources::Changed      the task + task.created
//!     .into_writes                  PutResource + outbox::stage → PutJob (subscribed)
//!                                                              or Log (skipped)
//!   commit::CommitPath::commit      1. one transaction (shared by concurrent writers)
//!                                   2. durable (one flush for the round)
//!                                   3. publish (snapshots, account table)
//!                                   4. hand the jobs to the dispatcher
//!   → 201
//! actors::dispatcher                fair queue: per-org FIFO and cap, global cap
//!   actors::delivery                prepare (endpoint now; removed?) → attempt (sign, POST)
//!   actors::dispatcher::record      domain::delivery::next_step: done, or retry at +2 s
//!   actors::log                     batch → CommitPath::record_attempts (log + outbox)
//! ```
//!
//! Organization commands (roles, members, the webhook) take the same path
//! from the organization's actor, which decides against its state and
//! waits out each commit, so the org's rules hold without races.
#![forbid(unsafe_code)]

pub mod accounts;
pub mod actors;
pub mod admissions;
pub mod commit;
pub mod config;
pub mod dashboard;
pub mod domain;
pub mod http;
pub mod ids;
pub mod metrics;
pub mod secrets;
pub mod startup;
pub mod state;
pub mod storage;
pub mod telemetry;
pub mod time;
pub mod webhooks;
pub mod workspace;
