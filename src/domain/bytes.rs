//! A byte vector in serde as one run of bytes, not as a sequence of
//! numbers (`#[serde(with = "crate::domain::bytes")]`). The store's codec,
//! bincode, writes both the same way (the length, then the bytes), so
//! values stored before read the same; but a run is encoded and decoded in
//! one copy, where a sequence takes a call per byte (about 3 µs for an
//! answer of 360 bytes; an envelope is bigger). JSON writes both as an
//! array of numbers, and reads either.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Serializer;

/// Writes `bytes` as one run.
pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(bytes)
}

/// Reads a run of bytes, or a sequence of numbers.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    deserializer.deserialize_byte_buf(Bytes)
}

struct Bytes;

impl<'de> Visitor<'de> for Bytes {
    type Value = Vec<u8>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("bytes")
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
        Ok(bytes.to_vec())
    }

    fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(bytes)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(byte) = seq.next_element()? {
            bytes.push(byte);
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsNumbers {
        head: u16,
        body: Vec<u8>,
        tail: String,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsRun {
        head: u16,
        #[serde(with = "super")]
        body: Vec<u8>,
        tail: String,
    }

    fn bincode<T: Serialize>(value: &T) -> Vec<u8> {
        bincode::serde::encode_to_vec(value, bincode::config::standard()).unwrap_or_default()
    }

    fn from_bincode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
        bincode::serde::decode_from_slice(bytes, bincode::config::standard())
            .ok()
            .map(|(value, _)| value)
    }

    #[test]
    fn a_run_is_stored_as_the_numbers_were_and_reads_them_back() {
        for body in [
            vec![],
            vec![0, 1, 255],
            (0..=255).cycle().take(700).collect(),
        ] {
            let numbers = AsNumbers {
                head: 201,
                body: body.clone(),
                tail: "after".into(),
            };
            let run = AsRun {
                head: 201,
                body,
                tail: "after".into(),
            };
            assert_eq!(bincode(&run), bincode(&numbers), "the same bytes");
            assert_eq!(
                from_bincode::<AsRun>(&bincode(&numbers)).as_ref(),
                Some(&run)
            );
            assert_eq!(
                from_bincode::<AsNumbers>(&bincode(&run)).as_ref(),
                Some(&numbers)
            );
            assert_eq!(
                serde_json::to_string(&run).ok(),
                serde_json::to_string(&numbers).ok()
            );
            let json = serde_json::to_string(&numbers).unwrap_or_default();
            assert_eq!(
                serde_json::from_str::<AsRun>(&json).ok().as_ref(),
                Some(&run)
            );
        }
    }
}
