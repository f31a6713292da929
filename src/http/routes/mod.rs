//! One module per resource; [`configure`] registers every route, and the
//! OpenAPI document is collected from those same registrations.

pub mod admin;
pub mod analyses;
pub mod audit;
pub mod capsules;
pub mod decisions;
pub mod effective_permissions;
pub mod event_types;
pub mod fallback;
pub mod health;
pub mod imports;
pub mod me;
pub mod members;
pub mod memories;
pub mod metrics;
pub mod openapi;
pub mod organizations;
pub mod projects;
pub mod roles;
pub mod tasks;
pub mod webhook;
pub mod webhook_recover;

use utoipa_actix_web::scope;
use utoipa_actix_web::service_config::ServiceConfig;

/// Registers every route. Routes are grouped in scopes by their first
/// static segments (`/admin`, `/organizations/{org_id}`, then `/roles`,
/// `/tasks`, …), so the router compares a request's path with a few static
/// prefixes and runs the pattern of only the routes of its group: tested
/// one after the other, the patterns of every route before the matching
/// one cost 5 % of a task create's CPU.
pub fn configure(cfg: &mut ServiceConfig) {
    health::configure(cfg);
    openapi::configure(cfg);
    me::configure(cfg);
    event_types::configure(cfg);
    metrics::configure(cfg);
    cfg.service(scope("/admin").configure(admin::configure));
    cfg.service(scope("/organizations/{org_id}").configure(organization_routes));
}

/// Routes under `/organizations/{org_id}`, relative to it.
fn organization_routes(cfg: &mut ServiceConfig) {
    organizations::configure(cfg);
    cfg.service(scope("/roles").configure(roles::configure))
        .service(scope("/members").configure(|cfg| {
            members::configure(cfg);
            effective_permissions::configure_for_members(cfg);
        }))
        .service(scope("/permissions").configure(effective_permissions::configure));
    audit::configure(cfg);
    cfg.service(scope("/webhook").configure(|cfg| {
        webhook::configure(cfg);
        webhook_recover::configure(cfg);
    }))
    .service(scope("/decisions").configure(decisions::configure))
    .service(scope("/tasks").configure(tasks::configure))
    .service(scope("/memories").configure(memories::configure))
    .service(scope("/projects").configure(|cfg| {
        projects::configure(cfg);
        imports::configure_for_projects(cfg);
    }))
    .service(scope("/capsules").configure(capsules::configure))
    .service(scope("/imports").configure(imports::configure))
    .service(scope("/pull-requests/analyses").configure(analyses::configure));
}
