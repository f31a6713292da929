//! Webhook secrets and signatures (seed 4.3, CONTRACT §6).
//!
//! - `X-Service-Signature: sha256=<hex>`: HMAC-SHA256 of the raw body, keyed
//!   with the UTF-8 bytes of the whole secret string (`whsec_…` included).
//! - `webhook-signature: v1,<base64>`: Standard Webhooks, HMAC-SHA256 of
//!   `{id}.{timestamp}.{body}` keyed with the base64-decoded part after `whsec_`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::secrets::{fill_random, Secret};

type HmacSha256 = Hmac<Sha256>;

/// The Standard Webhooks secret prefix.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret: `whsec_` and 32 CSPRNG bytes in padded base64.
pub fn new_secret() -> Secret {
    let mut bytes = [0u8; 32];
    fill_random(&mut bytes);
    Secret::new(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return [0; 32],
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// The `X-Service-Signature` value for `body`.
pub fn service_signature(secret: &Secret, body: &[u8]) -> String {
    format!("sha256={}", hex(&hmac(secret.expose().as_bytes(), &[body])))
}

/// The `webhook-signature` value (Standard Webhooks v1).
pub fn standard_signature(secret: &Secret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let encoded = secret
        .expose()
        .strip_prefix(SECRET_PREFIX)
        .unwrap_or(secret.expose());
    let key = STANDARD
        .decode(encoded)
        .unwrap_or_else(|_| secret.expose().as_bytes().to_vec());
    let timestamp = timestamp.to_string();
    let mac = hmac(
        &key,
        &[id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
    );
    format!("v1,{}", STANDARD.encode(mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_have_the_standard_format() {
        let secret = new_secret();
        let text = secret.expose();
        assert!(text.starts_with("whsec_"));
        assert_eq!(STANDARD.decode(&text[6..]).map(|b| b.len()).ok(), Some(32));
        assert_ne!(new_secret(), secret);
    }

    #[test]
    fn service_signature_matches_a_known_vector() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let secret = Secret::new("Jefe".into());
        assert_eq!(
            service_signature(&secret, b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn standard_signature_matches_the_specification_example() {
        // The example of the Standard Webhooks specification.
        let secret = Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            standard_signature(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
