//! Memberships: `/organizations/{org_id}/members…` (CONTRACT §5).

use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::actors::messages::OrgCommand;
use crate::domain::commands::roles::parse_permissions;
use crate::domain::error::ApiError;
use crate::domain::member::MembershipView;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::paging::{paginate, ListQuery, Page};
use crate::http::problem::Problem;
use crate::http::route_table::{
    MEMBERS_ADD, MEMBERS_GET, MEMBERS_LIST, MEMBERS_REMOVE, MEMBERS_UPDATE,
};
use crate::http::{path_id, AppContext};
use crate::ids::UserId;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_members)
        .service(add_member)
        .service(get_member)
        .service(change_role)
        .service(remove_member);
}

/// Documentation shape of `POST …/members`: exactly one of `user_id` and
/// `email`, and `role_id` (see [`crate::http::schema::fields::add_member`]).
pub struct AddMember;

impl utoipa::PartialSchema for AddMember {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        crate::http::schema::fields::add_member().into()
    }
}

impl ToSchema for AddMember {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("AddMember")
    }
}

/// Documentation shape of `PATCH …/members/{user_id}` (see
/// [`crate::http::schema::fields::change_member`]).
pub struct ChangeRole;

impl utoipa::PartialSchema for ChangeRole {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        crate::http::schema::fields::change_member().into()
    }
}

impl ToSchema for ChangeRole {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("ChangeRole")
    }
}

/// `?permission=` of the member list.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct PermissionFilter {
    /// Only members whose role holds this key.
    #[param(schema_with = crate::http::schema::fields::permission_key)]
    permission: Option<String>,
}

fn member_id(path: &(String, String)) -> Result<UserId, ApiError> {
    path_id(&path.1, "member", UserId::parse)
}

/// Members by user id (`org:team:read`); `?permission=` keeps those whose role holds that key.
#[utoipa::path(operation_id = "list_members", tag = "members", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"),
        PermissionFilter,
        crate::http::paging::KeyPaging),
    responses((status = 200, body = Page<MembershipView>), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn list_members(access: OrgAccess, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    access.allow(MEMBERS_LIST)?;
    let query = ListQuery::parse(&req)?;
    let wanted = match query.filters.get("permission") {
        Some(key) => parse_permissions(std::slice::from_ref(key))?,
        None => Default::default(),
    };
    let state = &access.state;
    let rows = state
        .members
        .values()
        .filter(|m| {
            state
                .permissions_of(m.user_id)
                .is_some_and(|held| held.contains_all(wanted))
        })
        .map(|m| (m.user_id.as_bytes().to_vec(), state.member_view(m)));
    Ok(HttpResponse::Ok().json(paginate(
        rows,
        query.cursor.as_deref(),
        query.limit_or_default(),
    )))
}

/// One membership (`org:team:read`, or your own).
#[utoipa::path(operation_id = "get_member", tag = "members", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"), ("user_id" = String, Path, description = "user id")),
    responses((status = 200, body = MembershipView), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{user_id}")]
async fn get_member(
    access: OrgAccess,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let member = access.member(&path.1, MEMBERS_GET)?;
    Ok(HttpResponse::Ok().json(access.state.member_view(member)))
}

/// Invites a user (`org:team:invite`); emits `member.added`.
#[utoipa::path(operation_id = "add_member", tag = "members", security(("bearer" = [])), request_body = AddMember,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 201, body = MembershipView), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
#[post("")]
async fn add_member(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    ctx.learn_invitee(&input).await?;
    ctx.run_command(
        &access,
        &req,
        MEMBERS_ADD,
        OrgCommand::AddMember(input),
        StatusCode::CREATED,
    )
    .await
}

/// Changes a member's role (`org:team:manage`); emits `member.role_changed`.
#[utoipa::path(operation_id = "update_member", tag = "members", security(("bearer" = [])), request_body = ChangeRole,
    params(("org_id" = String, Path, description = "organization id"), ("user_id" = String, Path, description = "user id")),
    responses((status = 200, body = MembershipView), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
#[patch("/{user_id}")]
async fn change_role(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    ctx.run_command(
        &access,
        &req,
        MEMBERS_UPDATE,
        OrgCommand::ChangeMemberRole(member_id(&path)?, input),
        StatusCode::OK,
    )
    .await
}

/// Removes a member (`org:team:manage`, or yourself); emits `member.removed`.
#[utoipa::path(operation_id = "remove_member", tag = "members", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"), ("user_id" = String, Path, description = "user id")),
    responses((status = 204, description = "Removed"), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem)))]
#[delete("/{user_id}")]
async fn remove_member(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    ctx.run_command(
        &access,
        &req,
        MEMBERS_REMOVE,
        OrgCommand::RemoveMember(member_id(&path)?),
        StatusCode::NO_CONTENT,
    )
    .await
}
