//! Helpers shared by the workspace-resource routes.

use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::Resource;
use crate::http::extract::OrgAccess;
use crate::http::paging::{encode_cursor, ListQuery, Page};
use crate::http::resource_routes::RouteSpec;
use crate::http::{path_id, AppContext};
use crate::ids::ResourceId;
use crate::workspace::Workspace;

impl OrgAccess {
    /// 403 FORBIDDEN unless the caller holds every key `route` needs.
    pub fn allow(&self, route: RouteSpec) -> Result<(), ApiError> {
        route.requires.iter().try_for_each(|key| self.require(*key))
    }

    /// The organization's resources, as seen by this request.
    pub fn workspace<'a>(&'a self, ctx: &'a AppContext) -> Workspace<'a> {
        Workspace::new(&ctx.store, &ctx.commit, &self.state)
    }
}

/// A resource id from the path: 404 naming the kind when malformed.
pub fn resource_id<T: Resource>(raw: &str) -> Result<ResourceId, ApiError> {
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
    let next_cursor = if page.more {
        page.items.last().map(|r| encode_cursor(r.id().as_bytes()))
    } else {
        None
    };
    Ok(HttpResponse::Ok().json(Page {
        items: page.items,
        next_cursor,
    }))
}

/// The resource named by the path, checked in the contract's order: 404
/// when it is not the organization's, then 403 unless the caller holds
/// what `route` needs.
pub async fn locate<T: Resource>(
    ctx: &AppContext,
    access: &OrgAccess,
    raw_id: &str,
    route: RouteSpec,
) -> Result<T, ApiError> {
    let current = access
        .workspace(ctx)
        .get::<T>(resource_id::<T>(raw_id)?)
        .await?;
    access.allow(route)?;
    Ok(current)
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

/// `DELETE …/{id}`: removes the resource, firing `event` with its last representation.
pub async fn delete_resource<T: Resource>(
    ctx: &AppContext,
    access: &OrgAccess,
    raw_id: &str,
    route: RouteSpec,
    event: Option<EventKind>,
) -> Result<HttpResponse, ApiError> {
    let current = locate::<T>(ctx, access, raw_id, route).await?;
    access
        .workspace(ctx)
        .delete::<T>(current.id(), event)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
