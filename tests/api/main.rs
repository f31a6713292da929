//! Integration tests: one binary, a real server per test on port 0 with a
//! temp data dir, spoken to over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod engines;
mod event_schemas;
mod helpers;
mod netns;
mod pki;
mod receiver;
mod webdriver;

mod actors;
mod admin;
mod admin_cli;
mod audit;
mod backlog;
mod bad_input;
mod bounded_reads;
mod cluster;
mod dashboard_browser;
mod disk_full;
mod effective_permissions;
mod event_types;
mod fuzz_regressions;
mod https;
mod isolation;
mod load_tool;
mod members;
mod observability;
mod openapi;
mod openapi_client;
mod openapi_lint;
mod postgres;
mod rate_limits;
mod receiver_example;
mod resources_access;
mod resources_bad_input;
mod resources_events;
mod resources_transitions;
mod restart;
mod role_expiry;
mod roles;
mod secrets_at_rest;
mod slow_bodies;
mod smoke;
mod storage_copy;
mod subscriber_python;
mod webhook_crash;
mod webhook_delivery;
mod webhook_isolation;
mod webhook_log;
mod webhook_policy;
mod webhook_recover;
mod webhook_retry;
mod webhook_setup;
mod webhook_smoke;
