//! Typed identifiers. Every id is a UUID v7 (time-ordered), so ids sort by
//! creation time and can serve as storage keys for newest-first listings.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Issues UUID v7 values that are strictly increasing within this process,
/// even when many are made in the same millisecond.
struct MonotonicV7 {
    /// The last (unix millisecond, 12-bit sequence) handed out.
    last: Mutex<(u64, u16)>,
}

static GENERATOR: MonotonicV7 = MonotonicV7 {
    last: Mutex::new((0, 0)),
};

impl MonotonicV7 {
    fn next(&self) -> Uuid {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let (millis, seq) = {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let next = if now > last.0 {
                (now, 0)
            } else if last.1 < 0x0fff {
                (last.0, last.1 + 1)
            } else {
                (last.0 + 1, 0)
            };
            *last = next;
            next
        };
        let mut random = [0u8; 8];
        crate::secrets::fill_random(&mut random);
        let mut bytes = [0u8; 16];
        bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
        bytes[6] = 0x70 | ((seq >> 8) as u8 & 0x0f);
        bytes[7] = seq as u8;
        bytes[8..].copy_from_slice(&random);
        bytes[8] = 0x80 | (bytes[8] & 0x3f);
        Uuid::from_bytes(bytes)
    }
}

/// A fresh, process-monotonic UUID v7.
pub fn new_v7() -> Uuid {
    GENERATOR.next()
}

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new, time-ordered id.
            pub fn generate() -> Self {
                Self(new_v7())
            }

            /// Parses the canonical hyphenated form; anything else is `None`.
            pub fn parse(text: &str) -> Option<Self> {
                if text.len() != 36 {
                    return None;
                }
                Uuid::parse_str(text).ok().map(Self)
            }

            /// The 16 raw bytes, used in storage keys.
            pub fn as_bytes(&self) -> &[u8; 16] {
                self.0.as_bytes()
            }

            /// Rebuilds an id from storage-key bytes.
            pub fn from_slice(bytes: &[u8]) -> Option<Self> {
                Uuid::from_slice(bytes).ok().map(Self)
            }

            /// When it was made: the Unix milliseconds of a UUID v7.
            pub fn unix_ms(&self) -> i64 {
                let mut millis = [0u8; 8];
                millis[2..].copy_from_slice(&self.as_bytes()[..6]);
                i64::try_from(u64::from_be_bytes(millis)).unwrap_or(i64::MAX)
            }

            /// The smallest id made at `unix_ms`: where a range of ids made
            /// from then on starts.
            pub fn first_at(unix_ms: i64) -> Self {
                let mut bytes = [0u8; 16];
                let millis = u64::try_from(unix_ms).unwrap_or(0).to_be_bytes();
                bytes[..6].copy_from_slice(&millis[2..]);
                Self(Uuid::from_bytes(bytes))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }
    };
}

typed_id!(
    /// An organization.
    OrgId
);
typed_id!(
    /// A user account.
    UserId
);
typed_id!(
    /// A role of one organization's catalog.
    RoleId
);
typed_id!(
    /// An issued bearer token (not the secret itself).
    TokenId
);
typed_id!(
    /// An audit-log record.
    AuditId
);
typed_id!(
    /// A request, for correlating logs and audit records.
    RequestId
);
typed_id!(
    /// A webhook delivery (the same on both attempts).
    DeliveryId
);
typed_id!(
    /// A delivery-log record.
    LogId
);
typed_id!(
    /// A webhook test (`test_id`).
    TestId
);
typed_id!(
    /// A workspace resource (decision, task, memory, capsule, project, import, analysis).
    ResourceId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v7_ids_are_strictly_increasing_and_versioned() {
        let ids: Vec<Uuid> = (0..10_000).map(|_| new_v7()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids.iter().all(|id| id.get_version_num() == 7));
    }

    #[test]
    fn parse_accepts_only_canonical_uuids() {
        let id = OrgId::generate();
        assert_eq!(OrgId::parse(&id.to_string()), Some(id));
        assert_eq!(OrgId::parse("not-a-uuid"), None);
        assert_eq!(OrgId::parse(&id.0.simple().to_string()), None);
    }
}
