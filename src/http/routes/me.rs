//! `GET /me` and `GET /permissions`.

use actix_web::{get, web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::permissions::Permission;
use crate::domain::user::User;
use crate::http::extract::UserAuth;
use crate::http::paging::{paginate, ListQuery, Page};
use crate::http::problem::Problem;
use crate::http::AppContext;
use crate::ids::{OrgId, RoleId};

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(me).service(permissions);
}

/// One of the caller's memberships.
#[derive(Serialize, ToSchema)]
pub struct MyMembership {
    /// The organization.
    organization_id: OrgId,
    /// The role held.
    role_id: RoleId,
    /// The role's current name.
    role_name: String,
}

/// The caller and their memberships.
#[derive(Serialize, ToSchema)]
pub struct Me {
    /// The caller.
    user: User,
    /// Every organization the caller belongs to.
    memberships: Vec<MyMembership>,
}

/// A key of the permission catalog.
#[derive(Serialize, ToSchema)]
pub struct CatalogEntry {
    /// `org:<domain>:<verb>`.
    key: &'static str,
    /// The domain.
    domain: &'static str,
    /// The verb.
    verb: &'static str,
    /// Marked sensitive in the UI.
    sensitive: bool,
}

/// The caller and their memberships.
#[utoipa::path(operation_id = "get_me", tag = "me", security(("bearer" = [])), responses((status = 200, body = Me), (status = 401, body = Problem)))]
#[get("/me")]
async fn me(auth: UserAuth, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let user = ctx
        .accounts
        .user(auth.user)
        .ok_or(ApiError::Unauthenticated("the user no longer exists"))?;
    let orgs = if ctx.store.shared() {
        // Another node may have added or removed this user anywhere.
        let mut orgs = Vec::new();
        for (org, revision) in ctx.store.orgs_of(auth.user).await? {
            orgs.extend(ctx.commit.fresh_snapshot(org, Some(revision)).await?);
        }
        orgs
    } else {
        ctx.directory.orgs_of(auth.user)
    };
    let memberships = orgs
        .iter()
        .filter_map(|org| {
            let member = org.members.get(&auth.user)?;
            let role = org.roles.get(&org.role_in_force(member))?;
            Some(MyMembership {
                organization_id: org.id(),
                role_id: role.id,
                role_name: role.name.clone(),
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(Me { user, memberships }))
}

/// The permission catalog, in the seed's order: every key unless `?limit=` pages it.
#[utoipa::path(operation_id = "list_permissions", tag = "me", security(("bearer" = [])), params(crate::http::paging::KeyPaging),
    responses((status = 200, body = Page<CatalogEntry>), (status = 400, body = Problem), (status = 401, body = Problem)))]
#[get("/permissions")]
async fn permissions(_: UserAuth, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let query = ListQuery::parse(&req)?;
    // The paging key is the key's position in the catalog (52 < 256).
    let rows = Permission::ALL.iter().enumerate().map(|(i, p)| {
        let entry = CatalogEntry {
            key: p.key(),
            domain: p.domain(),
            verb: p.verb(),
            sensitive: p.is_sensitive(),
        };
        (vec![i as u8], entry)
    });
    let limit = query.limit.unwrap_or(usize::MAX);
    Ok(HttpResponse::Ok().json(paginate(rows, query.cursor.as_deref(), limit)))
}
