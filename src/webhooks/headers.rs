//! Header names and fixed values of outbound deliveries (seed 4.3, CONTRACT §6).

/// `Content-Type`.
pub const CONTENT_TYPE: &str = "Content-Type";
/// `User-Agent`.
pub const USER_AGENT: &str = "User-Agent";
/// The seed's fixed user agent, carrying the version 1.0.
pub const USER_AGENT_VALUE: &str = "Service-Webhooks/1.0";
/// The event id.
pub const X_SERVICE_EVENT: &str = "X-Service-Event";
/// `sha256=<hex>` of the body.
pub const X_SERVICE_SIGNATURE: &str = "X-Service-Signature";
/// `1` or `2`.
pub const X_SERVICE_ATTEMPT: &str = "X-Service-Attempt";
/// The delivery id, the same on both attempts.
pub const X_SERVICE_DELIVERY: &str = "X-Service-Delivery";
/// Standard Webhooks message id (the delivery id).
pub const WEBHOOK_ID: &str = "webhook-id";
/// Standard Webhooks timestamp: unix seconds when the attempt started.
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// Standard Webhooks signature: `v1,<base64>`.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
