//! The request body, read up to the limit but not yet judged: whether it is
//! JSON, too large or malformed is reported at the command's validation
//! step, after authentication and authorization (CONTRACT §1 check order).
//!
//! Reading is bounded in time and in memory (CONTRACT §11): a body must
//! arrive within `server.body_timeout_ms`, else 408 and the connection is
//! closed; and all bodies being read on this node together hold at most
//! `server.body_memory_mb`. A body that would need more is answered 503
//! SERVER_BUSY at once, and its connection closed, rather than left
//! waiting: a connection whose body is not read still holds what the HTTP
//! layer has buffered of it (up to a few hundred KiB), so waiting would not
//! bound memory.

use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
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

/// Bodies up to this size grow as they arrive. A larger one gets one buffer
/// of the whole limit at once: a single allocation of one size, which the
/// allocator maps from the system and gives back when the body is dropped,
/// instead of a trail of growing ones that stay in its pools.
const SMALL_BODY: usize = 64 * 1024;

/// A request body, for handlers of routes that take one.
pub struct JsonInput(pub Input);

/// How long a body may take and how much memory all bodies may hold.
pub struct BodyLimits {
    timeout: Duration,
    /// One permit per byte of buffer held by unfinished bodies.
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
        let json = is_json(req);
        let mut payload = payload.take();
        let limits = req
            .app_data::<web::Data<AppContext>>()
            .map(|ctx| (ctx.bodies.timeout, ctx.bodies.memory.clone()));
        Box::pin(async move {
            let Some((timeout, memory)) = limits else {
                return Err(ApiError::internal(std::io::Error::other(
                    "application context missing",
                )));
            };
            let read = read(&mut payload, json, &memory);
            let refusal = match actix_web::rt::time::timeout(timeout, read).await {
                Ok(Ok(input)) => return Ok(JsonInput(input)),
                Ok(Err(refusal)) => refusal,
                Err(_) => ApiError::BodyTimeout(timeout.as_millis()),
            };
            let drain = async { while let Some(Ok(_)) = payload.next().await {} };
            let _ = actix_web::rt::time::timeout(DRAIN_AFTER_TIMEOUT, drain).await;
            Err(refusal)
        })
    }
}

/// Reads the whole body; buffers it only when it is JSON and within the
/// limit, each buffer growth paid for from `memory` first (503 SERVER_BUSY
/// when it cannot be).
async fn read(
    payload: &mut Payload,
    json: bool,
    memory: &Arc<Semaphore>,
) -> Result<Input, ApiError> {
    let mut body = Buffer::Small(Vec::new());
    let mut held: Option<OwnedSemaphorePermit> = None;
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
            held = None;
            if seen > BODY_LIMIT + DRAIN_LIMIT {
                break;
            }
            continue;
        }
        if !json {
            continue;
        }
        if let Some(grown) = body.growth_for(chunk.len()) {
            let more = u32::try_from(grown - body.capacity()).unwrap_or(u32::MAX);
            let permit = memory
                .clone()
                .try_acquire_many_owned(more)
                .map_err(|_| ApiError::ServerBusy)?;
            match &mut held {
                Some(held) => held.merge(permit),
                None => held = Some(permit),
            }
            body.grow_to(grown)?;
        }
        body.extend(&chunk);
    }
    drop(held);
    Ok(if seen > BODY_LIMIT {
        Input::TooLarge
    } else if !json {
        Input::NotJson
    } else {
        Input::Json(body.into_bytes())
    })
}

/// A body being read: a growing vector while small, then one buffer of the
/// whole limit.
enum Buffer {
    Small(Vec<u8>),
    Large(LargeBody),
}

/// A large body's buffer: an anonymous mapping of [`BODY_LIMIT`] bytes,
/// whose pages go back to the system when it is dropped (an allocator
/// would keep them in its pools), and of which only what was written is
/// resident.
struct LargeBody {
    map: memmap2::MmapMut,
    len: usize,
}

impl AsRef<[u8]> for LargeBody {
    fn as_ref(&self) -> &[u8] {
        &self.map[..self.len]
    }
}

impl Buffer {
    fn len(&self) -> usize {
        match self {
            Buffer::Small(bytes) => bytes.len(),
            Buffer::Large(large) => large.len,
        }
    }

    fn capacity(&self) -> usize {
        match self {
            Buffer::Small(bytes) => bytes.capacity(),
            Buffer::Large(large) => large.map.len(),
        }
    }

    /// The capacity to grow to before `more` bytes fit, if they do not.
    fn growth_for(&self, more: usize) -> Option<usize> {
        let needed = self.len() + more;
        if needed <= self.capacity() {
            None
        } else if needed <= SMALL_BODY {
            Some(needed.max(self.capacity() * 2).min(SMALL_BODY))
        } else {
            Some(BODY_LIMIT)
        }
    }

    /// Grows to `capacity` bytes: a vector up to [`SMALL_BODY`], a mapping
    /// of the whole limit past it.
    fn grow_to(&mut self, capacity: usize) -> Result<(), ApiError> {
        match self {
            Buffer::Small(bytes) if capacity <= SMALL_BODY => {
                bytes.reserve_exact(capacity - bytes.len());
            }
            Buffer::Small(bytes) => {
                let mut map =
                    memmap2::MmapMut::map_anon(capacity).map_err(|_| ApiError::ServerBusy)?;
                map[..bytes.len()].copy_from_slice(bytes);
                *self = Buffer::Large(LargeBody {
                    map,
                    len: bytes.len(),
                });
            }
            Buffer::Large(_) => {}
        }
        Ok(())
    }

    /// Appends `chunk`, which fits (see [`Buffer::growth_for`]).
    fn extend(&mut self, chunk: &[u8]) {
        match self {
            Buffer::Small(bytes) => bytes.extend_from_slice(chunk),
            Buffer::Large(large) => {
                let end = large.len + chunk.len();
                large.map[large.len..end].copy_from_slice(chunk);
                large.len = end;
            }
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Buffer::Small(bytes) => Bytes::from(bytes),
            Buffer::Large(large) => Bytes::from_owner(large),
        }
    }
}
