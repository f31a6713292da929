//! The admin API (admin token only): users, tokens, organizations.

use actix_web::http::StatusCode;
use actix_web::{delete, patch, post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use std::sync::Arc;

use crate::actors::messages::OrgCommand;
use crate::commit::Commit;
use crate::domain::access::Caller;
use crate::domain::commands::organization::{create_organization, CreateOrganizationBody};
use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::names::{display_name, email};
use crate::domain::organization::Organization;
use crate::domain::user::{TokenKind, User};
use crate::http::body::JsonInput;
use crate::http::extract::{request_id, AdminAuth};
use crate::http::idempotency::{respond_with, reveals_secret, Keyed};
use crate::http::problem::Problem;
use crate::http::route_table::ORG_UPDATE;
use crate::http::{json_response, path_id, reply_response, AppContext};
use crate::ids::{OrgId, TokenId, UserId};
use crate::storage::UserKey;
use crate::time::Timestamp;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_user)
        .service(create_token)
        .service(revoke_token)
        .service(create_org)
        .service(update_org);
}

/// Body of `POST /admin/users`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// Unique, compared case-insensitively.
    #[schema(schema_with = crate::http::schema::fields::email)]
    email: String,
    /// Display name.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(schema_with = crate::http::schema::fields::title)]
    name: Option<String>,
}

/// Body of `POST /admin/users/{user_id}/tokens`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// `api` or `session`.
    kind: TokenKind,
    /// A label.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(schema_with = crate::http::schema::fields::title)]
    name: Option<String>,
}

/// A newly issued token: the only time its plaintext is shown.
#[derive(Serialize, ToSchema)]
pub struct IssuedToken {
    /// Token id, for revocation.
    id: TokenId,
    /// `api` or `session`.
    kind: TokenKind,
    /// The label.
    name: Option<String>,
    /// The bearer token. Shown once; only its SHA-256 is stored.
    token: String,
    /// When it was issued.
    created_at: Timestamp,
}

/// Documentation shape of `POST /admin/organizations`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct CreateOrganization {
    /// Display name.
    #[schema(schema_with = crate::http::schema::fields::title)]
    name: String,
    /// `free`, `pro` or `enterprise`.
    plan: crate::domain::organization::Plan,
    /// The first Owner.
    owner_user_id: UserId,
}

/// Documentation shape of organization PATCH bodies.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct UpdateOrganization {
    /// New display name (needs `org:settings:manage`).
    #[schema(schema_with = crate::http::schema::fields::title)]
    name: Option<String>,
    /// New plan (needs `org:billing:manage`).
    #[schema(nullable = false)]
    plan: Option<crate::domain::organization::Plan>,
}

/// Creates a user.
#[utoipa::path(operation_id = "admin_create_user", tag = "admin", security(("bearer" = [])), request_body = CreateUser,
    responses((status = 201, body = User), (status = 400, body = Problem), (status = 401, body = Problem), (status = 409, body = Problem)))]
#[post("/users")]
async fn create_user(
    _: AdminAuth,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let body: CreateUser = input.parse()?;
    let email = email(&body.email)?;
    let name = body
        .name
        .as_deref()
        .map(|n| display_name("name", n))
        .transpose()?;
    let user = ctx.account_changes.create_user(email, name).await?;
    Ok(json_response(StatusCode::CREATED, &user))
}

/// Issues a bearer token for a user.
#[utoipa::path(operation_id = "admin_create_token", tag = "admin", security(("bearer" = [])), request_body = CreateToken,
    params(("user_id" = String, Path, description = "user id")),
    responses((status = 201, body = IssuedToken), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem)))]
#[post("/users/{user_id}/tokens")]
async fn create_token(
    _: AdminAuth,
    ctx: web::Data<AppContext>,
    path: web::Path<String>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let user = path_id(&path, "user", UserId::parse)?;
    if ctx.account_changes.user(UserKey::Id(user)).await?.is_none() {
        return Err(ApiError::NotFound("user"));
    }
    let body: CreateToken = input.parse()?;
    let name = body
        .name
        .as_deref()
        .map(|n| display_name("name", n))
        .transpose()?;
    let (record, secret) = ctx
        .account_changes
        .create_token(user, body.kind, name)
        .await?;
    let issued = IssuedToken {
        id: record.id,
        kind: record.kind,
        name: record.name,
        token: secret.expose().to_owned(),
        created_at: record.created_at,
    };
    Ok(reveals_secret(json_response(StatusCode::CREATED, &issued)))
}

/// Revokes a token: it fails with 401 on the very next request.
#[utoipa::path(operation_id = "admin_revoke_token", tag = "admin", security(("bearer" = [])), params(("token_id" = String, Path, description = "token id")),
    responses((status = 204, description = "Revoked"), (status = 401, body = Problem), (status = 404, body = Problem)))]
#[delete("/tokens/{token_id}")]
async fn revoke_token(
    _: AdminAuth,
    ctx: web::Data<AppContext>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let token = path_id(&path, "token", TokenId::parse)?;
    ctx.account_changes.revoke_token(token).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Creates an organization with its Owner and Member roles and its first Owner.
#[utoipa::path(operation_id = "admin_create_organization", tag = "admin", security(("bearer" = [])), request_body = CreateOrganization,
    responses((status = 201, body = Organization), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem)))]
#[post("/organizations")]
async fn create_org(
    _: AdminAuth,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    JsonInput(input): JsonInput,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    let body: CreateOrganizationBody = input.parse()?;
    let owner_id = body.owner_id()?;
    let owner = ctx
        .account_changes
        .user(UserKey::Id(owner_id))
        .await?
        .ok_or(ApiError::NotFound("user"))?;
    let (state, change) = create_organization(&body, &owner)?;
    let state = Arc::new(state);
    let (mut writes, _) = change.into_writes(&state, None, &request_id(&req))?;
    let (answer, recorded) = respond_with(keyed.as_deref(), StatusCode::CREATED)(&state.org)?;
    writes.extend(recorded);
    let snapshot = Some(state);
    ctx.commit.commit(Commit { writes, snapshot }).await?;
    Ok(answer.into_response())
}

/// Renames an organization or changes its plan.
#[utoipa::path(operation_id = "admin_update_organization", tag = "admin", security(("bearer" = [])), request_body = UpdateOrganization,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = Organization), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem)))]
#[patch("/organizations/{org_id}")]
async fn update_org(
    _: AdminAuth,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    path: web::Path<String>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let org = path_id(&path, "organization", OrgId::parse)?;
    // Decide on the state as stored when another node may have changed it.
    ctx.commit.fresh_snapshot(org, None).await?;
    let reply = ctx
        .mutate(
            org,
            Caller::Admin,
            &req,
            ORG_UPDATE,
            OrgCommand::UpdateOrganization(input),
        )
        .await?;
    Ok(reply_response(reply, StatusCode::OK))
}
