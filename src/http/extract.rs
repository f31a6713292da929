//! Request extractors: the bearer token resolved to a caller, and for
//! organization routes the caller's permission set. On sled from memory
//! only (no locks held, no mailbox round trip); on a store other nodes
//! share, after one round trip that checks the token and the
//! organization's revision there (`checked`).

use std::future::{ready, Ready};

use futures_util::future::{Either, LocalBoxFuture};
use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};

use crate::domain::access::Caller;
use crate::domain::audit::RequestIdText;
use crate::domain::error::ApiError;
use crate::domain::org_state::OrgState;
use crate::domain::permissions::{Permission, PermissionSet};
use crate::http::credential::bearer_token;
use crate::http::AppContext;
use crate::ids::{OrgId, UserId};
use crate::secrets::{constant_time_eq, sha256};
use crate::storage::Freshness;

fn context(req: &HttpRequest) -> Result<&web::Data<AppContext>, ApiError> {
    req.app_data::<web::Data<AppContext>>()
        .ok_or_else(|| ApiError::internal(std::io::Error::other("application context missing")))
}

/// The request id set by the request-id middleware.
pub fn request_id(req: &HttpRequest) -> RequestIdText {
    req.extensions()
        .get::<RequestIdText>()
        .cloned()
        .unwrap_or_else(RequestIdText::generate)
}

/// A request made with a user's token (401 otherwise).
pub struct UserAuth {
    /// The user.
    pub user: UserId,
}

impl UserAuth {
    fn resolve(req: &HttpRequest) -> Result<Self, ApiError> {
        let token = bearer_token(req.headers())?;
        let user =
            context(req)?
                .accounts
                .user_for_token(token)
                .ok_or(ApiError::Unauthenticated(
                    "the bearer token is unknown or revoked",
                ))?;
        Ok(UserAuth { user })
    }
}

/// An extractor's answer: at once from memory, or after a round trip to a
/// store that several nodes share.
pub type Checked<T> =
    Either<Ready<Result<T, ApiError>>, LocalBoxFuture<'static, Result<T, ApiError>>>;

/// A check of this request's token (and of the path's organization) that
/// a middleware already made against the shared store, after the request
/// arrived ([`crate::http::idempotency`]): the extractor uses it instead of
/// asking again.
pub struct Prechecked {
    /// The SHA-256 of the token checked.
    pub token: [u8; 32],
    /// The organization asked about.
    pub org: Option<OrgId>,
    /// What the store answered.
    pub fresh: Option<Freshness>,
}

/// The request's token checked against the shared store, and its check
/// if one was made already.
struct SharedCheck {
    ctx: web::Data<AppContext>,
    token: String,
    prechecked: Option<Prechecked>,
}

/// The context and the presented token, when the store is shared by
/// several nodes: memory is then a cache, checked per request.
fn shared(req: &HttpRequest) -> Result<Option<SharedCheck>, ApiError> {
    let ctx = context(req)?;
    if !ctx.store.shared() {
        return Ok(None);
    }
    Ok(Some(SharedCheck {
        ctx: ctx.clone(),
        token: bearer_token(req.headers())?.to_owned(),
        prechecked: req.extensions_mut().remove::<Prechecked>(),
    }))
}

/// Checks the token (and `org`'s revision) against the shared store in one
/// round trip, unless that check was made already for this request: the
/// caller, and `org`'s snapshot, reloaded when another node changed it
/// since this node last read it.
async fn checked(
    check: SharedCheck,
    org: Option<OrgId>,
) -> Result<(UserId, Option<Arc<OrgState>>), ApiError> {
    let SharedCheck {
        ctx,
        token,
        prechecked,
    } = check;
    let digest = sha256(token.as_bytes());
    let prechecked =
        prechecked.filter(|pre| pre.token == digest && (org.is_none() || pre.org == org));
    let fresh = match prechecked {
        Some(pre) => pre.fresh,
        None => ctx.commit.freshness(Some(&digest), org).await?,
    }
    .unwrap_or_default();
    let Some((record, user)) = fresh.account else {
        ctx.accounts.forget_token(&digest);
        return Err(ApiError::Unauthenticated(
            "the bearer token is unknown or revoked",
        ));
    };
    let caller = user.id;
    ctx.accounts.learn(user, Some(record));
    let Some(org) = org else {
        return Ok((caller, None));
    };
    let revision = fresh.revision.ok_or(ApiError::NotFound("organization"))?;
    let state = ctx
        .commit
        .fresh_snapshot(org, Some(revision))
        .await?
        .ok_or(ApiError::NotFound("organization"))?;
    Ok((caller, Some(state)))
}

impl FromRequest for UserAuth {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        match shared(req) {
            Ok(Some(check)) => Either::Right(Box::pin(async move {
                let (user, _) = checked(check, None).await?;
                Ok(UserAuth { user })
            })),
            Ok(None) => Either::Left(ready(Self::resolve(req))),
            Err(err) => Either::Left(ready(Err(err))),
        }
    }
}

/// Checks the bearer token against a configured token's SHA-256, in
/// constant time; `missing` names the token in the 401.
fn require_token(
    req: &HttpRequest,
    expected: &[u8; 32],
    missing: &'static str,
) -> Result<(), ApiError> {
    if constant_time_eq(&sha256(bearer_token(req.headers())?.as_bytes()), expected) {
        Ok(())
    } else {
        Err(ApiError::Unauthenticated(missing))
    }
}

/// A request made with the admin token (401 otherwise).
pub struct AdminAuth;

impl FromRequest for AdminAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready((|| {
            let expected = context(req)?.admin_token_sha256;
            require_token(req, &expected, "this endpoint requires the admin token")?;
            Ok(AdminAuth)
        })())
    }
}

/// A scrape of `/metrics`: open when `metrics.token` is empty, else it
/// needs that bearer token (401 otherwise).
pub struct MetricsAuth;

impl FromRequest for MetricsAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready((|| {
            if let Some(expected) = context(req)?.metrics_token_sha256 {
                require_token(req, &expected, "this endpoint requires the metrics token")?;
            }
            Ok(MetricsAuth)
        })())
    }
}

/// A member's request on `/organizations/{org_id}/…`: 401, then 404 when
/// the organization is unknown or the caller is not a member.
pub struct OrgAccess {
    /// The caller.
    pub user: UserId,
    /// The organization's snapshot, as of this request.
    pub state: Arc<OrgState>,
    /// The caller's effective permissions.
    pub permissions: PermissionSet,
}

impl OrgAccess {
    fn resolve(req: &HttpRequest) -> Result<Self, ApiError> {
        let UserAuth { user } = UserAuth::resolve(req)?;
        let org = Self::org_of(req)?;
        let state = context(req)?
            .directory
            .get(org)
            .ok_or(ApiError::NotFound("organization"))?;
        Self::of_member(user, state)
    }

    /// The organization of the path.
    fn org_of(req: &HttpRequest) -> Result<OrgId, ApiError> {
        req.match_info()
            .get("org_id")
            .and_then(OrgId::parse)
            .ok_or(ApiError::NotFound("organization"))
    }

    /// `user`'s access to `state`: 404 unless a member.
    fn of_member(user: UserId, state: Arc<OrgState>) -> Result<Self, ApiError> {
        let permissions = state
            .permissions_of(user)
            .ok_or(ApiError::NotFound("organization"))?;
        Ok(OrgAccess {
            user,
            state,
            permissions,
        })
    }

    /// 403 FORBIDDEN unless the caller holds `key`: for a key the request
    /// itself decides (a decision's status move). Routes name theirs in the
    /// route table and check them with `allow`.
    pub fn require(&self, key: Permission) -> Result<(), ApiError> {
        crate::domain::access::require(self.permissions, key)
    }

    /// The caller, for commands.
    pub fn caller(&self) -> Caller {
        Caller::User(self.user)
    }

    /// The organization's id.
    pub fn org_id(&self) -> OrgId {
        self.state.id()
    }
}

impl FromRequest for OrgAccess {
    type Error = ApiError;
    type Future = Checked<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let shared = shared(req).and_then(|shared| Ok((shared, Self::org_of(req)?)));
        match shared {
            Ok((Some(check), org)) => Either::Right(Box::pin(async move {
                let (user, state) = checked(check, Some(org)).await?;
                let state = state.ok_or(ApiError::NotFound("organization"))?;
                Self::of_member(user, state)
            })),
            Ok((None, _)) => Either::Left(ready(Self::resolve(req))),
            Err(err) => Either::Left(ready(Err(err))),
        }
    }
}
