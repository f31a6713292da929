//! The shared services every request handler and actor reaches.

use std::sync::Arc;
use std::time::Duration;

use crate::accounts::Accounts;
use crate::directory::Directory;
use crate::domain::event::EventSink;
use crate::storage::Storage;

/// Shared, long-lived services.
pub struct Services {
    /// The database.
    pub storage: Storage,
    /// Organization snapshots.
    pub directory: Directory,
    /// Users and tokens.
    pub accounts: Accounts,
    /// Where mutations put their events.
    pub events: Arc<dyn EventSink>,
    /// SHA-256 of the admin token.
    pub admin_token_sha256: [u8; 32],
    /// How long an organization actor lives without messages.
    pub org_idle_timeout: Duration,
}
