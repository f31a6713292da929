//! How organization routes find what their path names and check what
//! their route needs: in the contract's order (404, then 403) for what the
//! snapshot holds in memory, and the permission first for what only the
//! store holds (CONTRACT §11); and the helpers shared by the
//! workspace-resource routes.

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::member::Membership;
use crate::domain::resources::Resource;
use crate::domain::role::Role;
use crate::domain::webhook::WebhookEndpoint;
use crate::http::extract::OrgAccess;
use crate::http::paging::{ListQuery, Page};
use crate::http::route_table::RouteSpec;
use crate::http::{path_id, AppContext};
use crate::ids::{ResourceId, RoleId, UserId};
use crate::workspace::Workspace;

impl OrgAccess {
    /// 403 FORBIDDEN unless the caller holds every key `route` needs.
    pub fn allow(&self, route: RouteSpec) -> Result<(), ApiError> {
        route.needs().check(self.permissions, self.caller(), None)
    }

    /// As [`allow`](Self::allow), for a route acting on `target`'s
    /// membership (which may spare oneself).
    pub fn allow_on(&self, route: RouteSpec, target: UserId) -> Result<(), ApiError> {
        route
            .needs()
            .check(self.permissions, self.caller(), Some(target))
    }

    /// The role named by the path (404), then 403 unless `route` allows.
    pub fn role(&self, raw_id: &str, route: RouteSpec) -> Result<&Arc<Role>, ApiError> {
        let id = path_id(raw_id, "role", RoleId::parse)?;
        let role = self
            .state
            .roles
            .get(&id)
            .ok_or(ApiError::NotFound("role"))?;
        self.allow(route)?;
        Ok(role)
    }

    /// The membership named by the path (404), then 403 unless `route` allows.
    pub fn member(&self, raw_id: &str, route: RouteSpec) -> Result<&Arc<Membership>, ApiError> {
        let id = path_id(raw_id, "member", UserId::parse)?;
        let member = self
            .state
            .members
            .get(&id)
            .ok_or(ApiError::NotFound("member"))?;
        self.allow_on(route, id)?;
        Ok(member)
    }

    /// The webhook endpoint (404 when none), then 403 unless `route` allows.
    pub fn webhook(&self, route: RouteSpec) -> Result<&Arc<WebhookEndpoint>, ApiError> {
        let endpoint = self
            .state
            .webhook
            .as_ref()
            .ok_or(ApiError::NotFound("webhook"))?;
        self.allow(route)?;
        Ok(endpoint)
    }

    /// The organization's resources, as seen by this request.
    pub fn workspace<'a>(&'a self, ctx: &'a AppContext) -> Workspace<'a> {
        Workspace::new(&ctx.store, &ctx.commit, &self.state)
    }
}

/// A resource id from the path: 404 naming the kind when malformed.
fn resource_id<T: Resource>(raw: &str) -> Result<ResourceId, ApiError> {
    path_id(raw, T::NAME, ResourceId::parse)
}

/// A newest-first page of the organization's resources of kind `T`, of
/// `parent` only when given.
pub async fn list<T: Resource + ToSchema>(
    ctx: &AppContext,
    access: &OrgAccess,
    req: &HttpRequest,
    parent: Option<ResourceId>,
) -> Result<HttpResponse, ApiError> {
    let query = ListQuery::parse(req)?;
    let before = query.cursor_id(ResourceId::from_slice)?;
    let page = access
        .workspace(ctx)
        .page::<T>(before, query.limit_or_default(), parent)
        .await?;
    Ok(HttpResponse::Ok().json(Page::of_records(page, |r| *r.id().as_bytes(), |r| r)))
}

/// The resource named by the path: 403 unless the caller holds what
/// `route` needs, then 404 when it is not the organization's. The
/// permission comes before the store is read (CONTRACT §11), so a caller
/// without it learns nothing of which ids exist.
pub async fn locate<T: Resource>(
    ctx: &AppContext,
    access: &OrgAccess,
    raw_id: &str,
    route: RouteSpec,
) -> Result<T, ApiError> {
    access.allow(route)?;
    access
        .workspace(ctx)
        .get::<T>(resource_id::<T>(raw_id)?)
        .await
}

/// `GET …/{id}`: the resource as stored.
pub async fn get_resource<T: Resource + Serialize>(
    ctx: &AppContext,
    access: &OrgAccess,
    raw_id: &str,
    route: RouteSpec,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(locate::<T>(ctx, access, raw_id, route).await?))
}
