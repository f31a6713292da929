//! The role catalog: `/organizations/{org_id}/roles…` (seed 4.1, CONTRACT §4).

use actix_web::http::header::{ContentType, IF_MATCH};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::actors::messages::OrgCommand;
use crate::domain::access::IfMatch;
use crate::domain::error::ApiError;
use crate::domain::member::MembershipView;
use crate::domain::role::RoleView;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::paging::{paginate, ListQuery, Page};
use crate::http::problem::Problem;
use crate::http::route_table::{
    ROLES_CREATE, ROLES_DELETE, ROLES_GET, ROLES_LIST, ROLES_UPDATE, ROLE_MEMBERS,
};
use crate::http::{path_id, AppContext};
use crate::ids::RoleId;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_roles)
        .service(create_role)
        .service(get_role)
        .service(update_role)
        .service(delete_role)
        .service(role_members);
}

/// Documentation shape of `POST …/roles`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct CreateRole {
    /// 1..=64 characters after trimming; unique case-insensitively.
    #[schema(schema_with = crate::http::schema::fields::role_name)]
    name: String,
    /// At most 500 characters.
    #[schema(schema_with = crate::http::schema::fields::role_description)]
    description: Option<String>,
    /// Permission keys.
    #[schema(schema_with = crate::http::schema::fields::permission_keys)]
    permissions: Option<Vec<String>>,
    /// Adds every key of this role of the same organization.
    #[schema(schema_with = crate::http::schema::fields::role_id)]
    copy_permissions_from: Option<String>,
}

/// Documentation shape of `PATCH …/roles/{role_id}`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct UpdateRole {
    /// New name.
    #[schema(schema_with = crate::http::schema::fields::role_name)]
    name: Option<String>,
    /// New description.
    #[schema(schema_with = crate::http::schema::fields::role_description)]
    description: Option<String>,
    /// The complete new set of permission keys.
    #[schema(schema_with = crate::http::schema::fields::permission_keys)]
    permissions: Option<Vec<String>>,
}

fn role_id(path: &(String, String)) -> Result<RoleId, ApiError> {
    path_id(&path.1, "role", RoleId::parse)
}

fn if_match(req: &HttpRequest) -> Option<IfMatch> {
    req.headers()
        .get(IF_MATCH)
        .map(|v| IfMatch::parse(v.to_str().unwrap_or("")))
}

/// Every role: Owner, Member, then custom roles by name. Without `limit`, all rows.
#[utoipa::path(operation_id = "list_roles", tag = "roles", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"),
        crate::http::paging::KeyPaging),
    responses((status = 200, body = Page<RoleView>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn list_roles(access: OrgAccess, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    access.allow(ROLES_LIST)?;
    let query = ListQuery::parse(&req)?;
    let state = &access.state;
    let page = |cursor: Option<&[u8]>, limit: Option<usize>| {
        let rows = state
            .roles_in_list_order()
            .into_iter()
            .map(|(key, role)| (key, state.role_view(role)));
        paginate(rows, cursor, limit.unwrap_or(usize::MAX))
    };
    if query.cursor.is_none() && query.limit.is_none() {
        let whole = state
            .role_list_json
            .get_or_init(|| serde_json::to_vec(&page(None, None)).ok());
        if let Some(json) = whole {
            return Ok(HttpResponse::Ok()
                .content_type(ContentType::json())
                .body(web::Bytes::copy_from_slice(json)));
        }
    }
    Ok(HttpResponse::Ok().json(page(query.cursor.as_deref(), query.limit)))
}

/// One role, with its `ETag`.
#[utoipa::path(operation_id = "get_role", tag = "roles", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"), ("role_id" = String, Path, description = "role id")),
    responses((status = 200, body = RoleView, headers(("ETag" = String, description = "for If-Match"))),
        (status = 401, body = Problem), (status = 404, body = Problem)))]
#[get("/{role_id}")]
async fn get_role(
    access: OrgAccess,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let role = access.role(&path.1, ROLES_GET)?;
    Ok(HttpResponse::Ok()
        .insert_header(("ETag", role.etag()))
        .json(access.state.role_view(role)))
}

/// Creates a custom role (`org:settings:manage`, Enterprise plan).
#[utoipa::path(operation_id = "create_role", tag = "roles", security(("bearer" = [])), request_body = CreateRole,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 201, body = RoleView), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 402, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem),
        (status = 409, body = Problem), (status = 413, body = Problem), (status = 415, body = Problem), (status = 422, body = Problem)))]
#[post("")]
async fn create_role(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    ctx.run_command(
        &access,
        &req,
        ROLES_CREATE,
        OrgCommand::CreateRole(input),
        StatusCode::CREATED,
    )
    .await
}

/// Edits a role (`org:settings:manage`, Enterprise plan); honours `If-Match`.
#[utoipa::path(operation_id = "update_role", tag = "roles", security(("bearer" = [])), request_body = UpdateRole,
    params(("org_id" = String, Path, description = "organization id"), ("role_id" = String, Path, description = "role id"),
        ("If-Match" = Option<String>, Header, description = "ETag from GET")),
    responses((status = 200, body = RoleView), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 402, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem),
        (status = 409, body = Problem), (status = 412, body = Problem), (status = 413, body = Problem), (status = 415, body = Problem)))]
#[patch("/{role_id}")]
async fn update_role(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    ctx.run_command(
        &access,
        &req,
        ROLES_UPDATE,
        OrgCommand::UpdateRole(role_id(&path)?, if_match(&req), input),
        StatusCode::OK,
    )
    .await
}

/// Deletes a custom role without members (`org:settings:manage`, Enterprise plan).
#[utoipa::path(operation_id = "delete_role", tag = "roles", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"), ("role_id" = String, Path, description = "role id"),
        ("If-Match" = Option<String>, Header, description = "ETag from GET")),
    responses((status = 204, description = "Deleted"), (status = 401, body = Problem), (status = 402, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem), (status = 412, body = Problem), (status = 422, body = Problem)))]
#[delete("/{role_id}")]
async fn delete_role(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    ctx.run_command(
        &access,
        &req,
        ROLES_DELETE,
        OrgCommand::DeleteRole(role_id(&path)?, if_match(&req)),
        StatusCode::NO_CONTENT,
    )
    .await
}

/// Members holding the role (`org:team:read`).
#[utoipa::path(operation_id = "list_role_members", tag = "roles", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"), ("role_id" = String, Path, description = "role id"),
        crate::http::paging::KeyPaging),
    responses((status = 200, body = Page<MembershipView>), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{role_id}/members")]
async fn role_members(
    access: OrgAccess,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let role = access.role(&path.1, ROLE_MEMBERS)?.id;
    let query = ListQuery::parse(&req)?;
    let state = &access.state;
    let rows = state
        .members
        .values()
        .filter(|m| state.role_in_force(m) == role)
        .map(|m| (m.user_id.as_bytes().to_vec(), state.member_view(m)));
    Ok(HttpResponse::Ok().json(paginate(
        rows,
        query.cursor.as_deref(),
        query.limit_or_default(),
    )))
}
