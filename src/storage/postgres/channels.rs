//! The `NOTIFY` channels nodes wake each other on: one per node, for jobs
//! of organizations it holds (told by lease claims and by commits), and
//! one every node listens on, for organizations a stopping node left with
//! jobs waiting and for the stop itself. Payloads are an organization's id,
//! jobs handed to the holder (see `handed`), or [`stopped`] of a node.

use uuid::Uuid;

/// The channel every node listens on: organizations a stopping node left
/// with jobs waiting.
pub const RELEASED_CHANNEL: &str = "rolecall_deliveries";

/// The channel on which other nodes tell `node` of jobs of organizations
/// it holds (the lease claim's SQL spells it the same way).
pub fn own_channel(node: Uuid) -> String {
    format!("rolecall_deliveries_{}", node.simple())
}

/// The payload saying that `node` stopped and released its leases: the
/// others stop telling it of jobs (a release of an older build ignores it,
/// as it names no organization).
pub fn stopped(node: Uuid) -> String {
    format!("{STOPPED}{node}")
}

/// The node a [`stopped`] payload names.
pub fn stopped_node(payload: &str) -> Option<Uuid> {
    payload.strip_prefix(STOPPED)?.parse().ok()
}

const STOPPED: &str = "stopped:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_names_its_node_and_no_organization() {
        let node = Uuid::now_v7();
        assert_eq!(stopped_node(&stopped(node)), Some(node));
        assert!(
            stopped(node).parse::<Uuid>().is_err(),
            "not an organization"
        );
        assert_eq!(stopped_node(&node.to_string()), None);
        assert_eq!(stopped_node("stopped:nonsense"), None);
    }

    #[test]
    fn a_nodes_channel_is_a_plain_identifier_within_postgresqls_limit() {
        let channel = own_channel(Uuid::now_v7());
        assert!(channel.len() <= 63, "{channel}");
        assert!(channel
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
    }
}
