//! Idempotency keys as stored (issue 31): per scope (the SHA-256 of the
//! token, the organization and the key), the request's fingerprint and
//! either a claim of the request running now or the answer it got, kept
//! until it expires. Both engines keep them the same way; the HTTP side is
//! [`crate::http::idempotency`].

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The answer of a request, as replayed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The headers a replay repeats (Content-Type, Location, ETag).
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(with = "crate::domain::bytes")]
    pub body: Vec<u8>,
}

/// A scope's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The SHA-256 of the request (method, path, body).
    pub fingerprint: [u8; 32],
    /// Running or answered.
    pub state: KeyState,
}

/// Where a key's request is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyState {
    /// Claimed by a request running now; another may take it over after
    /// `until` (the first one's node stopped).
    Running {
        /// Milliseconds since the epoch.
        until: i64,
    },
    /// Answered; forgotten after `expires`.
    Answered {
        /// The answer.
        answer: StoredAnswer,
        /// Milliseconds since the epoch.
        expires: i64,
    },
}

/// A request's claim of its key, as the request knows it: what it drops
/// when its answer is not kept ([`crate::storage::Store::idempotency_forget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyClaim {
    /// The SHA-256 of the token, the organization and the key.
    pub scope: [u8; 32],
    /// The SHA-256 of the request.
    pub fingerprint: [u8; 32],
    /// When the claim lapses: with the fingerprint, it tells this claim
    /// from a later one of a retry of the same request.
    pub until: Timestamp,
}

/// A request's answer recorded under its key's scope, as a write of the
/// change it answers ([`crate::domain::change::Write::KeyAnswer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyAnswer {
    /// The SHA-256 of the token, the organization and the key.
    pub scope: [u8; 32],
    /// The SHA-256 of the request.
    pub fingerprint: [u8; 32],
    /// Its answer.
    pub answer: StoredAnswer,
    /// When the answer is forgotten.
    pub expires: Timestamp,
}

impl KeyAnswer {
    /// The record it leaves under its scope.
    pub fn record(&self) -> KeyRecord {
        KeyRecord::answered(self.fingerprint, self.answer.clone(), self.expires)
    }
}

/// What a request carrying a key is to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Begin {
    /// Run: the key is claimed for it.
    Run,
    /// Another request with the key runs now (409): try again after this
    /// many milliseconds at most.
    Running {
        /// Until its claim lapses.
        for_ms: i64,
    },
    /// Answered before: replay this.
    Replay(StoredAnswer),
    /// The key was used for another request (422).
    Reused,
}

impl KeyRecord {
    /// A claim for a request of `fingerprint` running until `until`.
    pub fn running(fingerprint: [u8; 32], until: Timestamp) -> Self {
        KeyRecord {
            fingerprint,
            state: KeyState::Running {
                until: until.millis(),
            },
        }
    }

    /// The answer of a request of `fingerprint`, kept until `expires`.
    pub fn answered(fingerprint: [u8; 32], answer: StoredAnswer, expires: Timestamp) -> Self {
        KeyRecord {
            fingerprint,
            state: KeyState::Answered {
                answer,
                expires: expires.millis(),
            },
        }
    }

    /// Whether the record still counts at `now` (an answer not expired, a
    /// claim not lapsed).
    pub fn live(&self, now: Timestamp) -> bool {
        match &self.state {
            KeyState::Running { until } => *until > now.millis(),
            KeyState::Answered { expires, .. } => *expires > now.millis(),
        }
    }

    /// What a request of `fingerprint` does, this record being live.
    pub fn verdict(&self, fingerprint: &[u8; 32], now: Timestamp) -> Begin {
        if &self.fingerprint != fingerprint {
            return Begin::Reused;
        }
        match &self.state {
            KeyState::Running { until } => Begin::Running {
                for_ms: (until - now.millis()).max(1),
            },
            KeyState::Answered { answer, .. } => Begin::Replay(answer.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(fingerprint: [u8; 32], expires: i64) -> KeyRecord {
        KeyRecord {
            fingerprint,
            state: KeyState::Answered {
                answer: StoredAnswer {
                    status: 201,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: b"{}".to_vec(),
                },
                expires,
            },
        }
    }

    #[test]
    fn a_record_answers_its_own_request_and_refuses_another() {
        let now = Timestamp(10_000);
        let record = answered([1; 32], 20_000);
        assert!(record.live(now));
        assert!(matches!(record.verdict(&[1; 32], now), Begin::Replay(a) if a.status == 201));
        assert_eq!(record.verdict(&[2; 32], now), Begin::Reused);
        assert!(!record.live(Timestamp(20_000)), "expired");
        let running = KeyRecord::running([1; 32], Timestamp(12_500));
        assert_eq!(
            running.verdict(&[1; 32], now),
            Begin::Running { for_ms: 2_500 }
        );
        assert!(!running.live(Timestamp(12_500)), "a lapsed claim");
    }
}
