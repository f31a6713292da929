//! Webhooks: URL and address policy, signing, the outbound client, and the
//! webhook test with its pending results.

pub mod address_policy;
pub mod client;
pub mod headers;
pub mod preflight;
pub mod proxy;
pub mod recovery;
pub mod signing;
pub mod url;
