//! `GET /event-types`: the event catalog with the JSON Schema of each
//! envelope (Standard Webhooks asks senders to publish them).

use actix_web::{get, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::http::extract::UserAuth;
use crate::http::paging::{paginate, ListQuery, Page};
use crate::http::problem::Problem;
use crate::http::schema::events::EventType;

/// Registers the route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(event_types);
}

/// Every event, in the seed's order, with a description and the JSON Schema
/// (2020-12) of its envelope; `?limit=` pages it.
#[utoipa::path(operation_id = "list_event_types", tag = "me", security(("bearer" = [])), params(crate::http::paging::KeyPaging),
    responses((status = 200, body = Page<EventType>), (status = 400, body = Problem), (status = 401, body = Problem)))]
#[get("/event-types")]
async fn event_types(
    _: UserAuth,
    req: HttpRequest,
    catalog: web::Data<Vec<EventType>>,
) -> Result<HttpResponse, ApiError> {
    let query = ListQuery::parse(&req)?;
    // The paging key is the event's position in the catalog (23 < 256).
    let rows = catalog
        .iter()
        .enumerate()
        .map(|(i, entry)| (vec![i as u8], entry.clone()));
    let limit = query.limit.unwrap_or(usize::MAX);
    Ok(HttpResponse::Ok().json(paginate(rows, query.cursor.as_deref(), limit)))
}
