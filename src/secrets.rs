//! Randomness, hashing and comparison for secrets (bearer tokens, the admin
//! token), and the sealing of webhook signing secrets at rest. Plaintext
//! secrets live only in [`Secret`], whose `Debug` is redacted.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
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

/// The key that encrypts webhook signing secrets at rest
/// (`storage.secret_key`): 32 bytes, given as standard base64.
#[derive(Clone)]
pub struct SealingKey([u8; 32]);

/// Why a sealing key or a sealed secret is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The key is not 32 bytes of standard base64.
    #[error("a secret key is 32 random bytes in standard base64 (44 characters, e.g. `openssl rand -base64 32`)")]
    BadKey,
    /// The sealed text is malformed, or the key (or the organization) is not
    /// the one it was sealed with.
    #[error("the secret does not open with this key")]
    WrongKey,
}

/// How a sealed secret starts, so a stored secret says whether it is sealed
/// (`whsec_…` never starts so).
const SEALED: &str = "sealed:v1:";

impl SealingKey {
    /// Parses a key: 32 bytes in standard base64 (surrounding blanks ignored).
    pub fn parse(text: &str) -> Result<Self, SealError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::BadKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| SealError::BadKey)?;
        Ok(SealingKey(key))
    }

    /// A new random key.
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        fill_random(&mut key);
        SealingKey(key)
    }

    /// The key in its configuration form (standard base64).
    pub fn expose(&self) -> String {
        STANDARD.encode(self.0)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&self.0.into())
    }

    /// `secret` sealed for `owner` (XChaCha20-Poly1305 with a random nonce,
    /// `owner` as associated data, so a sealed secret copied to another
    /// owner does not open): `sealed:v1:` and base64 of nonce and ciphertext.
    pub fn seal(&self, owner: &[u8], secret: &Secret) -> Result<String, SealError> {
        let mut nonce = [0u8; 24];
        fill_random(&mut nonce);
        let payload = Payload {
            msg: secret.expose().as_bytes(),
            aad: owner,
        };
        let sealed = self
            .cipher()
            .encrypt(&XNonce::from(nonce), payload)
            .map_err(|_| SealError::WrongKey)?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!("{SEALED}{}", STANDARD.encode(bytes)))
    }

    /// The secret `sealed` holds for `owner`.
    pub fn open(&self, owner: &[u8], sealed: &str) -> Result<Secret, SealError> {
        let encoded = sealed.strip_prefix(SEALED).ok_or(SealError::WrongKey)?;
        let bytes = STANDARD.decode(encoded).map_err(|_| SealError::WrongKey)?;
        let (nonce, ciphertext) = bytes.split_at_checked(24).ok_or(SealError::WrongKey)?;
        let nonce: [u8; 24] = nonce.try_into().map_err(|_| SealError::WrongKey)?;
        let payload = Payload {
            msg: ciphertext,
            aad: owner,
        };
        let plain = self
            .cipher()
            .decrypt(&XNonce::from(nonce), payload)
            .map_err(|_| SealError::WrongKey)?;
        String::from_utf8(plain)
            .map(Secret)
            .map_err(|_| SealError::WrongKey)
    }

    /// Whether a stored secret is sealed.
    pub fn is_sealed(stored: &str) -> bool {
        stored.starts_with(SEALED)
    }
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
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
    fn sealed_secrets_open_only_with_their_key_and_owner() {
        let key = SealingKey::generate();
        let secret = Secret::new("whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYg==".into());
        let (org, other) = ([1u8; 16], [2u8; 16]);
        let Ok(sealed) = key.seal(&org, &secret) else {
            panic!("sealing failed")
        };
        assert!(SealingKey::is_sealed(&sealed) && !SealingKey::is_sealed(secret.expose()));
        assert!(!sealed.contains("whsec_") && !sealed.contains("c2VjcmV0"));
        assert_eq!(key.open(&org, &sealed), Ok(secret.clone()));
        assert_ne!(
            key.seal(&org, &secret).ok(),
            Some(sealed.clone()),
            "a fresh nonce each time"
        );
        assert_eq!(key.open(&other, &sealed), Err(SealError::WrongKey));
        assert_eq!(
            SealingKey::generate().open(&org, &sealed),
            Err(SealError::WrongKey)
        );
        assert_eq!(key.open(&org, "sealed:v1:AAAA"), Err(SealError::WrongKey));
        let again = SealingKey::parse(&format!(" {} \n", key.expose()));
        assert_eq!(again.map(|k| k.open(&org, &sealed)), Ok(Ok(secret)));
        assert_eq!(SealingKey::parse("c2hvcnQ=").err(), Some(SealError::BadKey));
        assert_eq!(
            SealingKey::parse("not base64!").err(),
            Some(SealError::BadKey)
        );
        assert_eq!(format!("{key:?}"), "[redacted]");
    }

    #[test]
    fn constant_time_eq_matches_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
