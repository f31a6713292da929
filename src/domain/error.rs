//! The one error type every request path returns. Each variant is a code of
//! CONTRACT §1; `http::problem` gives it its HTTP status and turns it into
//! RFC 9457 problem details.

use crate::domain::permissions::Permission;

/// What kind of resource a body may reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// A decision (PR analysis findings).
    Decision,
    /// A project (a task's `project_id`).
    Project,
}

impl Reference {
    /// The kind's name, for details.
    pub fn name(self) -> &'static str {
        match self {
            Reference::Decision => "decision",
            Reference::Project => "project",
        }
    }
}

/// A refused request, or an internal failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed JSON, wrong types, missing or unknown fields, out-of-range values.
    #[error("{detail}")]
    Validation {
        /// What is wrong, for the client.
        detail: String,
        /// The offending field, when one is known.
        field: Option<String>,
    },
    /// Permission keys that are not in the catalog.
    #[error("unknown permission keys")]
    UnknownPermission(Vec<String>),
    /// Event ids outside seed §6, or `test.preflight` in a subscription.
    #[error("unknown event ids")]
    UnknownEvent(Vec<String>),
    /// A webhook URL the policy refuses.
    #[error("{0}")]
    InvalidUrl(String),
    /// Saving a webhook without a passed, unexpired, unused test.
    #[error("{0}")]
    TestRequired(&'static str),
    /// A status move the state machine does not allow.
    #[error("cannot move from {from} to {to}")]
    InvalidTransition {
        /// The current state.
        from: String,
        /// The requested state.
        to: String,
    },
    /// Editing a frozen capsule.
    #[error("the capsule is frozen")]
    CapsuleFrozen,
    /// A body names something that is not a resource of this organization
    /// (the kind, and the field that names it).
    #[error("{field} does not name a {kind} of this organization", kind = .0.name(), field = .1)]
    UnknownReference(Reference, &'static str),
    /// Demoting or removing the last Owner.
    #[error("the organization must keep at least one Owner; transfer ownership first")]
    MustHaveOwner,
    /// No, malformed, unknown or revoked credentials.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// Role writes need the Enterprise plan.
    #[error("custom roles can be created, edited or deleted only on the Enterprise plan")]
    LicenseRequired,
    /// The caller's role lacks a key.
    #[error("your role lacks the permission {}", .0.key())]
    Forbidden(Permission),
    /// Granting or assigning keys the caller does not hold.
    #[error("you cannot grant or assign permissions you do not hold")]
    PermissionEscalation(Vec<&'static str>),
    /// Any change to the Owner role.
    #[error("the Owner role cannot be changed or deleted")]
    RoleImmutable,
    /// Deleting the Member role.
    #[error("the Member role is a system role and cannot be deleted")]
    SystemRole,
    /// Unknown id, route, or an organization the caller is not a member of.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// No route for this method on an existing path.
    #[error("method not allowed")]
    MethodNotAllowed(String),
    /// A role with this name (case-insensitively) exists.
    #[error("a role named {0:?} already exists in this organization")]
    NameConflict(String),
    /// The user is already a member.
    #[error("the user is already a member of this organization")]
    AlreadyMember,
    /// The email is used by another user.
    #[error("a user with this email already exists")]
    EmailTaken,
    /// `If-Match` does not match the current ETag.
    #[error("the role has changed since you read it (If-Match does not match its ETag)")]
    PreconditionFailed,
    /// Body over the limit.
    #[error("the request body exceeds 1 MiB")]
    PayloadTooLarge,
    /// A body without a JSON content type.
    #[error("request bodies must be sent with Content-Type: application/json")]
    UnsupportedMediaType,
    /// Deleting a role that still has members.
    #[error("the role still has {0} member(s); reassign them first")]
    RoleInUse(usize),
    /// A `role_id` that is not a role of this organization.
    #[error("role_id does not name a role of this organization")]
    UnknownRole,
    /// The store cannot take the write or answer the read now (disk full,
    /// I/O failure, database unreachable); nothing was changed.
    #[error("storage is unavailable; nothing was changed, try again shortly")]
    StorageUnavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The change was sent to the store, whose answer did not come back
    /// (the connection broke, or the answer was later than the timeout):
    /// it may have been made.
    #[error(
        "storage did not confirm the change, which may have been made: check before trying again"
    )]
    StorageUnconfirmed(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The token's requests are over `api.rate_limit_per_second`; nothing
    /// was done. Carries the seconds until the next request is allowed.
    #[error("too many requests with this token; try again in {0} s")]
    RateLimited(u64),
    /// An `Idempotency-Key` already used for another request (another
    /// method, path or body).
    #[error(
        "this Idempotency-Key was used for another request (method, path or body); use a new key"
    )]
    IdempotencyKeyReused,
    /// An `Idempotency-Key` whose first request is still running.
    #[error("a request with this Idempotency-Key is still running; try again after Retry-After")]
    IdempotencyKeyInProgress,
    /// The request body did not arrive in time (`server.body_timeout_ms`).
    #[error("the request body did not arrive within {0} ms; the connection is closed")]
    BodyTimeout(u128),
    /// The memory for request bodies (`server.body_memory_mb`) is spent.
    #[error("the server is reading as many request bodies as it can hold; try again shortly")]
    ServerBusy,
    /// Something failed inside the service; the cause is logged, not returned.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    /// A validation failure that names its field.
    pub fn invalid(field: &str, detail: impl Into<String>) -> Self {
        ApiError::Validation {
            detail: format!("{field}: {}", detail.into()),
            field: Some(field.to_owned()),
        }
    }

    /// A validation failure not tied to one field.
    pub fn malformed(detail: impl Into<String>) -> Self {
        ApiError::Validation {
            detail: detail.into(),
            field: None,
        }
    }

    /// An internal failure with its cause kept for the log.
    pub fn internal(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        ApiError::Internal(Box::new(err))
    }

    /// The machine-readable code.
    pub fn code(&self) -> &'static str {
        use ApiError::*;
        match self {
            Validation { .. } => "VALIDATION_FAILED",
            UnknownPermission(_) => "UNKNOWN_PERMISSION",
            UnknownEvent(_) => "UNKNOWN_EVENT",
            InvalidUrl(_) => "INVALID_URL",
            TestRequired(_) => "TEST_REQUIRED",
            InvalidTransition { .. } => "INVALID_TRANSITION",
            CapsuleFrozen => "CAPSULE_FROZEN",
            UnknownReference(Reference::Decision, _) => "UNKNOWN_DECISION",
            UnknownReference(Reference::Project, _) => "UNKNOWN_PROJECT",
            MustHaveOwner => "MUST_HAVE_OWNER",
            Unauthenticated(_) => "UNAUTHENTICATED",
            LicenseRequired => "LICENSE_REQUIRED",
            Forbidden(_) => "FORBIDDEN",
            PermissionEscalation(_) => "PERMISSION_ESCALATION",
            RoleImmutable => "ROLE_IMMUTABLE",
            SystemRole => "SYSTEM_ROLE",
            NotFound(_) => "NOT_FOUND",
            MethodNotAllowed(_) => "METHOD_NOT_ALLOWED",
            NameConflict(_) => "NAME_CONFLICT",
            AlreadyMember => "ALREADY_MEMBER",
            EmailTaken => "EMAIL_TAKEN",
            PreconditionFailed => "PRECONDITION_FAILED",
            PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            RoleInUse(_) => "ROLE_IN_USE",
            UnknownRole => "UNKNOWN_ROLE",
            StorageUnavailable(_) | StorageUnconfirmed(_) => "STORAGE_UNAVAILABLE",
            RateLimited(_) => "RATE_LIMITED",
            IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            IdempotencyKeyInProgress => "IDEMPOTENCY_KEY_IN_PROGRESS",
            BodyTimeout(_) => "REQUEST_TIMEOUT",
            ServerBusy => "SERVER_BUSY",
            Internal(_) => "INTERNAL",
        }
    }
}
