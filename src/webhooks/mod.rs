//! Webhooks: URL and address policy, signing, the outbound client, the
//! outbox sink and the pending tests.

pub mod address_policy;
pub mod client;
pub mod headers;
pub mod outbox;
pub mod preflight;
pub mod signing;
pub mod url;
