//! Randomness, hashing and comparison for secrets (bearer tokens, the admin
//! token). Plaintext secrets live only in [`Secret`], whose `Debug` is redacted.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// Fills `buf` from the operating system's CSPRNG.
///
/// A machine without a working entropy source cannot issue safe tokens, so
/// this aborts rather than continue with predictable bytes.
pub fn fill_random(buf: &mut [u8]) {
    if let Err(err) = getrandom::fill(buf) {
        panic!("the operating system's random source failed: {err}");
    }
}

/// SHA-256 of `data`: what is stored in place of a token.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A plaintext secret that never prints itself.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a plaintext secret.
    pub fn new(text: String) -> Self {
        Self(text)
    }

    /// The plaintext, for the one place that must reveal or hash it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// SHA-256 of the plaintext.
    pub fn digest(&self) -> [u8; 32] {
        sha256(self.0.as_bytes())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Serde for a secret in storage only (`#[serde(with = "crate::secrets::plaintext")]`).
pub mod plaintext {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Secret;

    /// Writes the plaintext.
    pub fn serialize<S: Serializer>(secret: &Secret, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(secret.expose())
    }

    /// Reads the plaintext.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
        String::deserialize(deserializer).map(Secret::new)
    }
}

/// A new bearer token: `rc_` and 32 random bytes in URL-safe base64.
pub fn new_token() -> Secret {
    let mut bytes = [0u8; 32];
    fill_random(&mut bytes);
    Secret(format!("rc_{}", URL_SAFE_NO_PAD.encode(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_prefixed() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert!(a.expose().starts_with("rc_"));
        assert_eq!(a.expose().len(), 3 + 43);
        assert_eq!(format!("{a:?}"), "[redacted]");
    }

    #[test]
    fn constant_time_eq_matches_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
