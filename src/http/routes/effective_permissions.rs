//! What a member may do: `GET …/members/{user_id}/permissions`,
//! `GET …/permissions/mine` and `POST …/permissions/check`. All three read
//! the same snapshot through [`OrgState::permissions_of`], the function that
//! enforcement uses, so an answer cannot disagree with the next request.

use std::collections::BTreeMap;

use actix_web::{get, post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::access::{check_keys, CHECK_LIMIT};
use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::member::Membership;
use crate::domain::org_state::OrgState;
use crate::domain::permissions::PermissionSet;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::problem::Problem;
use crate::http::route_table::{MEMBER_PERMISSIONS, MY_PERMISSIONS, PERMISSIONS_CHECK};
use crate::ids::{RoleId, UserId};
use crate::time::Timestamp;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(my_permissions).service(check_permissions);
}

/// Registers the route under a member (`/members/{user_id}/permissions`).
pub fn configure_for_members(cfg: &mut ServiceConfig) {
    cfg.service(member_permissions);
}

/// A member's effective permissions, with the role they come from.
#[derive(Serialize, ToSchema)]
pub struct EffectivePermissions {
    /// The member.
    user_id: UserId,
    /// The role in force.
    role_id: RoleId,
    /// Its name.
    role_name: String,
    /// The keys held, sorted.
    permissions: PermissionSet,
    /// When the role assignment ends; null when it does not.
    role_expires_at: Option<Timestamp>,
}

impl EffectivePermissions {
    fn of(state: &OrgState, member: &Membership) -> Result<Self, ApiError> {
        // As it stands now: an assignment that ran out is Member's already.
        let view = state.member_view(member);
        Ok(EffectivePermissions {
            user_id: view.user_id,
            role_id: view.role_id,
            role_name: view.role_name,
            permissions: state
                .permissions_of(member.user_id)
                .ok_or(ApiError::NotFound("member"))?,
            role_expires_at: view.role_expires_at,
        })
    }
}

/// Body of `POST …/permissions/check`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    /// Whose permissions to check (default: the caller); checking another
    /// member needs `org:team:read`.
    #[schema(schema_with = crate::http::schema::fields::user_id, required = false)]
    #[serde(default, deserialize_with = "non_null")]
    user_id: Option<String>,
    /// 1 to 100 keys of the catalog.
    #[schema(schema_with = checked_keys_schema)]
    permissions: Vec<String>,
}

fn checked_keys_schema() -> utoipa::openapi::Schema {
    crate::http::schema::fields::checked_permission_keys(CHECK_LIMIT)
}

/// The answer of a check: each key asked, and whether it is held.
#[derive(Serialize, ToSchema)]
pub struct CheckResults {
    /// Key → held.
    results: BTreeMap<&'static str, bool>,
}

/// A member's effective permissions (`org:team:read`, or your own).
#[utoipa::path(operation_id = "get_member_permissions", tag = "members", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"), ("user_id" = String, Path, description = "user id")),
    responses((status = 200, body = EffectivePermissions), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem)))]
#[get("/{user_id}/permissions")]
async fn member_permissions(
    access: OrgAccess,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let member = access.member(&path.1, MEMBER_PERMISSIONS)?;
    Ok(HttpResponse::Ok().json(EffectivePermissions::of(&access.state, member)?))
}

/// The caller's effective permissions (any member).
#[utoipa::path(operation_id = "get_my_permissions", tag = "members", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = EffectivePermissions), (status = 401, body = Problem), (status = 404, body = Problem)))]
#[get("/mine")]
async fn my_permissions(access: OrgAccess) -> Result<HttpResponse, ApiError> {
    access.allow(MY_PERMISSIONS)?;
    let member = access
        .state
        .members
        .get(&access.user)
        .ok_or(ApiError::NotFound("organization"))?;
    Ok(HttpResponse::Ok().json(EffectivePermissions::of(&access.state, member)?))
}

/// Which of up to 100 keys a member holds: yourself (any member), or
/// another member (`org:team:read`).
#[utoipa::path(operation_id = "check_permissions", tag = "members", security(("bearer" = [])), request_body = CheckRequest,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = CheckResults), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem), (status = 413, body = Problem),
        (status = 415, body = Problem)))]
#[post("/check")]
async fn check_permissions(
    access: OrgAccess,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let body: CheckRequest = input.parse()?;
    let target = match &body.user_id {
        Some(raw) => UserId::parse(raw)
            .ok_or_else(|| ApiError::invalid("user_id", "must be a user id (UUID)"))?,
        None => access.user,
    };
    access.allow_on(PERMISSIONS_CHECK, target)?;
    let results = check_keys(&access.state, target, &body.permissions)?;
    Ok(HttpResponse::Ok().json(CheckResults { results }))
}
