//! The request body, read up to the limit but not yet judged: whether it is
//! JSON, too large or malformed is reported at the command's validation
//! step, after authentication and authorization (CONTRACT §1 check order).
//!
//! Reading is bounded in time and in memory (CONTRACT §11): a body must
//! arrive within `server.body_timeout_ms`, else 408 and the connection is
//! closed; and all bodies in memory on this node, being read or waiting
//! for their handler, together hold at most `server.body_memory_mb` (what
//! is resident: a vector's capacity, a mapping's written pages). A body
//! that would need more is answered 503 SERVER_BUSY at once, and its
//! connection closed, rather than left waiting: a connection whose body is
//! not read still holds what the HTTP layer has buffered of it (up to about
//! 160 KiB), so waiting would not bound memory.

use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use futures_util::future::LocalBoxFuture;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::domain::error::ApiError;
use crate::domain::input::{Input, BODY_LIMIT};
use crate::http::AppContext;

/// Past the limit, at most this much more is read (and dropped) so the
/// client can still read our 413 instead of a reset connection.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// After a body's deadline, how long what the client already sent is read
/// and dropped, so that closing the connection does not reset it before
/// the client has read our 408.
const DRAIN_AFTER_TIMEOUT: Duration = Duration::from_millis(200);

/// Bodies up to this size grow as they arrive, in a vector. A larger one
/// moves into an anonymous mapping of the whole limit: only the pages it
/// writes are resident, and they go back to the system when the body is
/// dropped, instead of staying in the allocator's pools.
const SMALL_BODY: usize = 64 * 1024;

/// A request body, for handlers of routes that take one.
pub struct JsonInput(pub Input);

/// How long a body may take and how much memory all bodies may hold.
pub struct BodyLimits {
    timeout: Duration,
    /// One permit per byte of body buffers resident now; a body's permits
    /// go when it is dropped.
    memory: Arc<Semaphore>,
}

impl BodyLimits {
    /// Bodies of at most `timeout` each, holding at most `memory_bytes`
    /// together (at least one whole body's worth, so every body can finish).
    pub fn new(timeout: Duration, memory_bytes: usize) -> Self {
        let permits = memory_bytes.clamp(BODY_LIMIT, Semaphore::MAX_PERMITS);
        BodyLimits {
            timeout,
            memory: Arc::new(Semaphore::new(permits)),
        }
    }
}

fn is_json(req: &HttpRequest) -> bool {
    let Some(value) = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl FromRequest for JsonInput {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        // Read already, by a middleware that needed it first.
        if let Some(ReadBody(input)) = req.extensions_mut().remove::<ReadBody>() {
            return Box::pin(std::future::ready(Ok(JsonInput(input))));
        }
        Box::pin(read_input(req, payload.take()).map(|input| input.map(JsonInput)))
    }
}

/// A body a middleware read before the handler (see
/// [`crate::http::idempotency`]), left in the request's extensions for
/// [`JsonInput`]: read once, and its memory paid once.
pub struct ReadBody(pub Input);

/// Reads `payload`, the body of `req`, within the time and memory limits:
/// what [`JsonInput`] holds, or the refusal (408, 503).
pub fn read_input(
    req: &HttpRequest,
    mut payload: Payload,
) -> impl std::future::Future<Output = Result<Input, ApiError>> + 'static {
    let json = is_json(req);
    let limits = req
        .app_data::<web::Data<AppContext>>()
        .map(|ctx| (ctx.bodies.timeout, ctx.bodies.memory.clone()));
    async move {
        let Some((timeout, memory)) = limits else {
            return Err(ApiError::internal(std::io::Error::other(
                "application context missing",
            )));
        };
        let read = read(&mut payload, json, &memory);
        let refusal = match actix_web::rt::time::timeout(timeout, read).await {
            Ok(Ok(input)) => return Ok(input),
            Ok(Err(refusal)) => refusal,
            Err(_) => ApiError::BodyTimeout(timeout.as_millis()),
        };
        let drain = async { while let Some(Ok(_)) = payload.next().await {} };
        let _ = actix_web::rt::time::timeout(DRAIN_AFTER_TIMEOUT, drain).await;
        Err(refusal)
    }
}

/// Reads the whole body; buffers it only when it is JSON and within the
/// limit, each byte it makes resident paid for from `memory` first (503
/// SERVER_BUSY when it cannot be). The payment goes with the body.
async fn read(
    payload: &mut Payload,
    json: bool,
    memory: &Arc<Semaphore>,
) -> Result<Input, ApiError> {
    let mut body = Buffer::Small(Vec::new());
    let mut paid: Option<OwnedSemaphorePermit> = None;
    let mut seen = 0usize;
    while let Some(chunk) = payload.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(err) => return Ok(Input::Broken(format!("the body could not be read: {err}"))),
        };
        seen += chunk.len();
        if seen > BODY_LIMIT {
            // Judged too large whatever follows: keep nothing of it.
            body = Buffer::Small(Vec::new());
            paid = None;
            if seen > BODY_LIMIT + DRAIN_LIMIT {
                break;
            }
            continue;
        }
        if !json {
            continue;
        }
        let owed = body
            .resident_after(chunk.len())
            .saturating_sub(paid.as_ref().map_or(0, |p| p.num_permits()));
        if owed > 0 {
            let more = u32::try_from(owed).unwrap_or(u32::MAX);
            let permit = memory
                .clone()
                .try_acquire_many_owned(more)
                .map_err(|_| ApiError::ServerBusy)?;
            match &mut paid {
                Some(paid) => paid.merge(permit),
                None => paid = Some(permit),
            }
        }
        body.append(&chunk)?;
    }
    Ok(if seen > BODY_LIMIT {
        Input::TooLarge
    } else if !json {
        Input::NotJson
    } else {
        Input::Json(Bytes::from_owner(Held { body, _paid: paid }))
    })
}

/// A body and the memory paid for it, released together.
struct Held {
    body: Buffer,
    _paid: Option<OwnedSemaphorePermit>,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        match &self.body {
            Buffer::Small(bytes) => bytes,
            Buffer::Large(large) => &large.map[..large.len],
        }
    }
}

/// Memory pages, for what a mapping holds resident.
const PAGE: usize = 4096;

/// A body being read: a growing vector while small, then one mapping of
/// the whole limit.
enum Buffer {
    Small(Vec<u8>),
    Large(LargeBody),
}

/// A large body's buffer: an anonymous mapping of [`BODY_LIMIT`] bytes,
/// whose pages go back to the system when it is dropped (an allocator
/// would keep them in its pools), and of which only the pages written are
/// resident.
struct LargeBody {
    map: memmap2::MmapMut,
    len: usize,
}

impl Buffer {
    fn len(&self) -> usize {
        match self {
            Buffer::Small(bytes) => bytes.len(),
            Buffer::Large(large) => large.len,
        }
    }

    /// The capacity a vector grows to before `needed` bytes fit.
    fn small_capacity(&self, needed: usize) -> usize {
        match self {
            Buffer::Small(bytes) if needed <= bytes.capacity() => bytes.capacity(),
            Buffer::Small(bytes) => needed.max(bytes.capacity() * 2).min(SMALL_BODY),
            Buffer::Large(_) => 0,
        }
    }

    /// The memory resident once `more` bytes are appended.
    fn resident_after(&self, more: usize) -> usize {
        let needed = self.len() + more;
        match self {
            Buffer::Small(_) if needed <= SMALL_BODY => self.small_capacity(needed),
            _ => needed.div_ceil(PAGE) * PAGE,
        }
    }

    /// Appends `chunk` (within [`BODY_LIMIT`]): to the vector while it
    /// stays small, else to the mapping, made when first needed.
    fn append(&mut self, chunk: &[u8]) -> Result<(), ApiError> {
        let needed = self.len() + chunk.len();
        let capacity = self.small_capacity(needed);
        match self {
            Buffer::Small(bytes) if needed <= SMALL_BODY => {
                bytes.reserve_exact(capacity - bytes.len());
                bytes.extend_from_slice(chunk);
            }
            Buffer::Small(bytes) => {
                let mut map =
                    memmap2::MmapMut::map_anon(BODY_LIMIT).map_err(|_| ApiError::ServerBusy)?;
                map[..bytes.len()].copy_from_slice(bytes);
                map[bytes.len()..needed].copy_from_slice(chunk);
                *self = Buffer::Large(LargeBody { map, len: needed });
            }
            Buffer::Large(large) => {
                large.map[large.len..needed].copy_from_slice(chunk);
                large.len = needed;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(chunks: &[usize]) -> Buffer {
        let mut body = Buffer::Small(Vec::new());
        for (i, size) in chunks.iter().enumerate() {
            let chunk = vec![i as u8; *size];
            assert!(body.append(&chunk).is_ok());
        }
        body
    }

    #[test]
    fn small_bodies_grow_in_a_vector_large_ones_in_pages_of_a_mapping() {
        let body = filled(&[100]);
        assert_eq!(body.resident_after(0), 100);
        assert_eq!(body.resident_after(50), 200, "doubles");
        assert_eq!(body.resident_after(SMALL_BODY - 100), SMALL_BODY);
        assert_eq!(
            body.resident_after(SMALL_BODY),
            (SMALL_BODY + 100).div_ceil(PAGE) * PAGE
        );
        let large = filled(&[40_000, 40_000, 1]);
        assert!(matches!(large, Buffer::Large(_)));
        assert_eq!(large.len(), 80_001);
        assert_eq!(large.resident_after(0), 81_920, "20 pages");
        let held = Held {
            body: large,
            _paid: None,
        };
        let bytes = held.as_ref();
        assert_eq!((bytes[0], bytes[40_000], bytes[80_000]), (0, 1, 2));
    }

    #[test]
    fn a_body_keeps_its_memory_paid_until_dropped() {
        let memory = Arc::new(Semaphore::new(BODY_LIMIT));
        let Ok(permit) = memory.clone().try_acquire_many_owned(1000) else {
            panic!("permits");
        };
        let body = Bytes::from_owner(Held {
            body: filled(&[1000]),
            _paid: Some(permit),
        });
        assert_eq!(memory.available_permits(), BODY_LIMIT - 1000);
        let copy = body.clone();
        drop(body);
        assert_eq!(
            memory.available_permits(),
            BODY_LIMIT - 1000,
            "a clone keeps it"
        );
        drop(copy);
        assert_eq!(memory.available_permits(), BODY_LIMIT);
    }
}
