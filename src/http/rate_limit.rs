//! Per-token rate limits (`api.rate_limit_per_second`, `api.rate_limit_burst`):
//! a token bucket per bearer token, kept on this node. The outermost
//! middleware ([`observe`](crate::http::observe::observe)) judges each request
//! first: over the limit it is answered 429 RATE_LIMITED with `Retry-After`
//! before any handler runs, so nothing changes; every limited answer carries the IETF
//! `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` fields.
//! Probes and metrics (`/healthz`, `/readyz`, `/metrics`) and requests
//! without a bearer token are not limited; webhook deliveries never pass here.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use actix_web::dev::ServiceRequest;
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::{HttpResponse, ResponseError};

use crate::domain::error::ApiError;
use crate::http::credential::bearer_token;
use crate::secrets::sha256;

/// Shards of the bucket map, so that workers rarely wait on one lock.
const SHARDS: usize = 16;
/// Past this many buckets in a shard, full ones (the same as none) are
/// dropped; the next trim waits until the shard has doubled again, so that
/// many tokens in use at once cost amortized constant time, not a rescan
/// per request.
const SHARD_SOFT_LIMIT: usize = 4096;
/// Paths that are never limited: what load balancers and scrapers probe.
const EXEMPT: &[&str] = &["/healthz", "/readyz", "/metrics"];

/// One token's bucket: how many requests it may still make, as of `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The answer for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the request may run.
    pub allowed: bool,
    /// `RateLimit-Limit`: the burst.
    pub limit: u32,
    /// `RateLimit-Remaining`: requests that may follow at once.
    pub remaining: u32,
    /// `RateLimit-Reset`: seconds until the bucket is full again.
    pub reset_secs: u64,
    /// `Retry-After` of a refusal: seconds until one request is allowed.
    pub retry_after_secs: u64,
}

/// One shard of the buckets.
#[derive(Default)]
struct Shard {
    buckets: HashMap<u64, Bucket>,
    /// The size at which full buckets are next dropped.
    trim_at: usize,
}

/// The buckets of every token seen on this node.
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    limit: u32,
    keys: std::hash::RandomState,
    shards: Vec<Mutex<Shard>>,
    /// [`SHARD_SOFT_LIMIT`], smaller in tests.
    soft_limit: usize,
}

impl RateLimiter {
    /// A limiter of `per_second` sustained and `burst` at once (0: one
    /// second's worth); `None` when `per_second` is 0, which turns limits off.
    pub fn new(per_second: u32, burst: u32) -> Option<Self> {
        if per_second == 0 {
            return None;
        }
        let limit = if burst == 0 { per_second } else { burst };
        Some(RateLimiter {
            per_second: f64::from(per_second),
            burst: f64::from(limit),
            limit,
            keys: std::hash::RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            soft_limit: SHARD_SOFT_LIMIT,
        })
    }

    /// Takes one request at `now` from the bucket of the token whose
    /// SHA-256 is `token`: the hash, not the header's text, so that every
    /// spelling of one token shares its bucket.
    pub fn take(&self, token: &[u8; 32], now: Instant) -> Verdict {
        let key = self.keys.hash_one(token);
        let shard = &self.shards[(key % SHARDS as u64) as usize];
        let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
        if shard.buckets.len() >= shard.trim_at.max(self.soft_limit)
            && !shard.buckets.contains_key(&key)
        {
            shard
                .buckets
                .retain(|_, bucket| self.refilled(*bucket, now) < self.burst);
            shard.trim_at = shard.buckets.len() * 2;
        }
        let bucket = shard.buckets.entry(key).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let mut tokens = self.refilled(*bucket, now);
        let allowed = tokens >= 1.0;
        if allowed {
            tokens -= 1.0;
        }
        *bucket = Bucket { tokens, at: now };
        drop(shard);
        let seconds = |missing: f64| (missing.max(0.0) / self.per_second).ceil() as u64;
        Verdict {
            allowed,
            limit: self.limit,
            remaining: tokens.floor() as u32,
            reset_secs: seconds(self.burst - tokens),
            retry_after_secs: if allowed {
                0
            } else {
                seconds(1.0 - tokens).max(1)
            },
        }
    }

    /// The bucket's tokens at `now`, refilled since it was last used.
    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        (bucket.tokens + elapsed * self.per_second).min(self.burst)
    }
}

impl RateLimiter {
    /// The verdict on `req`: `None` when it is not limited (a probe, the
    /// metrics, or no bearer token).
    pub fn judge(&self, req: &ServiceRequest) -> Option<Verdict> {
        if EXEMPT.contains(&req.path()) {
            return None;
        }
        let token = bearer_token(req.headers()).ok()?;
        Some(self.take(&sha256(token.as_bytes()), Instant::now()))
    }
}

impl Verdict {
    /// The 429 answer of a refused request.
    pub fn refusal(self) -> HttpResponse {
        let mut refusal = ApiError::RateLimited(self.retry_after_secs).error_response();
        self.set_headers(refusal.headers_mut());
        refusal
    }

    /// Adds the IETF RateLimit fields.
    pub fn set_headers(self, headers: &mut HeaderMap) {
        for (name, value) in [
            ("ratelimit-limit", u64::from(self.limit)),
            ("ratelimit-remaining", u64::from(self.remaining)),
            ("ratelimit-reset", self.reset_secs),
        ] {
            headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key(token: &[u8]) -> [u8; 32] {
        sha256(token)
    }

    fn limiter(per_second: u32, burst: u32) -> RateLimiter {
        let Some(limiter) = RateLimiter::new(per_second, burst) else {
            panic!("a limit above 0 is on");
        };
        limiter
    }

    #[test]
    fn zero_per_second_is_off() {
        assert!(RateLimiter::new(0, 200).is_none());
    }

    #[test]
    fn a_burst_then_refusals_then_a_refill() {
        let limiter = limiter(2, 3);
        let start = Instant::now();
        let remaining: Vec<u32> = (0..3)
            .map(|_| limiter.take(&key(b"a"), start))
            .map(|v| {
                assert!(v.allowed);
                assert_eq!(v.limit, 3);
                v.remaining
            })
            .collect();
        assert_eq!(remaining, [2, 1, 0]);
        let refused = limiter.take(&key(b"a"), start);
        assert_eq!(
            refused,
            Verdict {
                allowed: false,
                limit: 3,
                remaining: 0,
                reset_secs: 2,
                retry_after_secs: 1
            }
        );
        // Another token has its own bucket.
        assert!(limiter.take(&key(b"b"), start).allowed);
        // Half a second refills one request at 2 per second.
        let later = start + Duration::from_millis(500);
        let again = limiter.take(&key(b"a"), later);
        assert!(again.allowed);
        assert_eq!(again.remaining, 0);
        assert!(!limiter.take(&key(b"a"), later).allowed);
        // A quiet spell refills up to the burst, never past it.
        let full = limiter.take(&key(b"a"), later + Duration::from_secs(60));
        assert_eq!(
            (full.allowed, full.remaining, full.reset_secs),
            (true, 2, 1)
        );
    }

    #[test]
    fn burst_zero_means_one_seconds_worth() {
        let limiter = limiter(5, 0);
        let now = Instant::now();
        let verdicts: Vec<bool> = (0..6)
            .map(|_| limiter.take(&key(b"t"), now).allowed)
            .collect();
        assert_eq!(verdicts, [true, true, true, true, true, false]);
        assert_eq!(limiter.take(&key(b"t"), now).retry_after_secs, 1);
    }

    #[test]
    fn a_slow_refill_says_how_long_to_wait() {
        let limiter = limiter(1, 1);
        let now = Instant::now();
        assert!(limiter.take(&key(b"t"), now).allowed);
        let refused = limiter.take(&key(b"t"), now + Duration::from_millis(100));
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs, 1);
    }

    #[test]
    fn full_buckets_are_dropped_when_a_shard_fills() {
        let mut limiter = limiter(1000, 1000);
        limiter.soft_limit = 8;
        let now = Instant::now();
        let size = |limiter: &RateLimiter| -> usize {
            limiter
                .shards
                .iter()
                .map(|s| s.lock().map(|m| m.buckets.len()).unwrap_or(0))
                .sum()
        };
        // Buckets in use are kept, whatever their number.
        for i in 0..(SHARDS * 16) as u64 {
            limiter.take(&key(&i.to_le_bytes()), now);
        }
        assert_eq!(size(&limiter), SHARDS * 16);
        // Once they are full again, new tokens push them out: only the
        // 1,000 new ones (in use) are left.
        let later = now + Duration::from_secs(5);
        for i in 0..1000u64 {
            limiter.take(&key(&(i + 1_000_000).to_le_bytes()), later);
        }
        assert_eq!(size(&limiter), 1000);
    }
}
