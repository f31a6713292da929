//! # rolecall
//!
//! A per-organization role catalog with server-side permission enforcement,
//! and signed webhook deliveries of workspace events.
#![forbid(unsafe_code)]

pub mod accounts;
pub mod actors;
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
