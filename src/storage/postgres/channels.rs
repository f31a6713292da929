//! The `NOTIFY` channels nodes wake each other on: one per node, for jobs
//! of organizations it holds (told by lease claims and by commits), and
//! one every node listens on, for organizations a stopping node left with
//! jobs waiting.

use uuid::Uuid;

/// The channel every node listens on: organizations a stopping node left
/// with jobs waiting.
pub const RELEASED_CHANNEL: &str = "rolecall_deliveries";

/// The channel on which other nodes tell `node` of jobs of organizations
/// it holds (the lease claim's SQL spells it the same way).
pub fn own_channel(node: Uuid) -> String {
    format!("rolecall_deliveries_{}", node.simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_channel_is_a_plain_identifier_within_postgresqls_limit() {
        let channel = own_channel(Uuid::now_v7());
        assert!(channel.len() <= 63, "{channel}");
        assert!(channel
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
    }
}
