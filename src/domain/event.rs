//! Workspace events (seed §6). Changes never deliver anything themselves:
//! their events are staged in the change's own transaction (see
//! [`crate::domain::outbox`]).

use crate::time::Timestamp;

macro_rules! events {
    ($( $variant:ident => $id:literal ),* $(,)?) => {
        /// An event id of seed §6.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventKind { $( $variant, )* }

        impl EventKind {
            /// Every event id, in the seed's order.
            pub const ALL: &'static [EventKind] = &[$( EventKind::$variant, )*];

            /// The id on the wire.
            pub const fn id(self) -> &'static str {
                match self { $( EventKind::$variant => $id, )* }
            }

            /// Parses an event id.
            pub fn parse(id: &str) -> Option<EventKind> {
                match id { $( $id => Some(EventKind::$variant), )* _ => None }
            }
        }
    };
}

events! {
    DecisionCreated => "decision.created",
    DecisionUpdated => "decision.updated",
    DecisionStatusChanged => "decision.status_changed",
    DecisionDeleted => "decision.deleted",
    MemoryCreated => "memory.created",
    MemoryUpdated => "memory.updated",
    MemoryDeleted => "memory.deleted",
    CapsuleCreated => "capsule.created",
    CapsuleUpdated => "capsule.updated",
    CapsuleDeleted => "capsule.deleted",
    TaskCreated => "task.created",
    TaskStatusChanged => "task.status_changed",
    TaskCompleted => "task.completed",
    PrAnalysisCompleted => "pr.analysis_completed",
    PrViolationDetected => "pr.violation_detected",
    PrResultsAccepted => "pr.results_accepted",
    ProjectCreated => "project.created",
    ProjectImportCompleted => "project.import_completed",
    ProjectImportFailed => "project.import_failed",
    MemberAdded => "member.added",
    MemberRemoved => "member.removed",
    MemberRoleChanged => "member.role_changed",
    TestPreflight => "test.preflight",
}

/// Something that happened, with `data` being the entity's REST representation.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Which event.
    pub kind: EventKind,
    /// When it happened.
    pub occurred_at: Timestamp,
    /// The entity exactly as the REST API returns it.
    pub data: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_has_the_seed_events() {
        assert_eq!(EventKind::ALL.len(), 23);
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.id()), Some(*kind));
        }
    }
}
