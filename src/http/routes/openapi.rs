//! `GET /openapi.json`: the OpenAPI 3.1 document of every route.

use actix_web::http::Method;
use actix_web::{get, web, App, HttpResponse};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ArrayItems, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::server::Server;
use utoipa::openapi::Required;
use utoipa::openapi::{Components, ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa_actix_web::service_config::ServiceConfig;
use utoipa_actix_web::AppExt;

use crate::http::idempotency;
use crate::http::problem::PROBLEM_JSON;

/// Registers the route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(openapi_json);
}

/// The document, collected from the route registrations themselves, so a
/// route cannot exist without being documented.
pub fn document() -> OpenApi {
    let (_, mut api) = App::new()
        .into_utoipa_app()
        .configure(super::configure)
        .split_for_parts();
    api.info.title = "rolecall".into();
    api.info.version = env!("CARGO_PKG_VERSION").into();
    api.info.description = Some("Per-organization role catalog with server-side permission enforcement, and signed webhooks.".into());
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    crate::http::schema::events::register(components);
    api.extensions
        .get_or_insert_with(Default::default)
        .insert("webhooks".into(), crate::http::schema::events::webhooks());
    // Paths are relative to wherever the document was fetched from.
    api.servers = Some(vec![Server::new("/")]);
    for (path, item) in api.paths.paths.iter_mut() {
        for (method, operation) in [
            (Method::GET, &mut item.get),
            (Method::PUT, &mut item.put),
            (Method::POST, &mut item.post),
            (Method::DELETE, &mut item.delete),
            (Method::PATCH, &mut item.patch),
        ] {
            let Some(operation) = operation else {
                continue;
            };
            document_body_errors(operation);
            document_access_errors(path, operation);
            document_rate_limit(operation);
            if idempotency::takes_key(&method, path) {
                document_idempotency_key(operation);
            }
            problems_as_problem_json(operation);
        }
    }
    pages_reference_their_items(components_of(&mut api));
    api
}

fn components_of(api: &mut OpenApi) -> &mut Components {
    api.components.get_or_insert_with(Default::default)
}

/// What every operation may answer besides its own outcomes: a public one
/// says it needs no token (`security: []`); one that takes a token may
/// answer 401, and 503 when the store cannot check it; one under an
/// organization may also answer 403 and 404.
fn document_access_errors(path: &str, operation: &mut Operation) {
    if operation.security.as_ref().is_none_or(Vec::is_empty) {
        operation.security = Some(Vec::new());
        return;
    }
    let mut errors = vec![
        ("401", "No token, or not a live one (UNAUTHENTICATED)"),
        (
            "503",
            "The store cannot answer now (STORAGE_UNAVAILABLE); nothing was done, try again after \
             `Retry-After`",
        ),
    ];
    if path.starts_with("/organizations/{org_id}") {
        errors.push((
            "403",
            "The caller lacks a permission the operation needs (FORBIDDEN)",
        ));
        errors.push((
            "404",
            "No such organization, or the caller is not a member of it, or no such record \
             (NOT_FOUND)",
        ));
    }
    for (status, description) in errors {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| problem(description).into());
    }
}

/// An operation that creates or changes takes an `Idempotency-Key`
/// ([`idempotency`]), and may answer 409 and 422 because of it.
fn document_idempotency_key(operation: &mut Operation) {
    let key = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "A key of the client's (1 to 255 printable ASCII characters) that makes a retry \
             safe: the first answer of this token's request with the key is kept for \
             `api.idempotency_ttl_hours` and replayed to a retry with the same method, path and \
             body, with `Idempotent-Replayed: true`, and nothing runs again. 5xx answers, and \
             answers that show a secret (a rotation, a first Test that passed, an issued token), \
             are not kept.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(idempotency::KEY_MAX))
                // No space first or last: HTTP drops it from a header value.
                .pattern(Some("^[!-~](?:[ -~]*[!-~])?$")),
        ))
        .build();
    operation.parameters.get_or_insert_with(Vec::new).push(key);
    for (status, description) in [
        (
            "400",
            "The Idempotency-Key is not 1 to 255 printable ASCII characters (VALIDATION_FAILED, \
             `field`: `Idempotency-Key`)",
        ),
        (
            "409",
            "A request with the same Idempotency-Key is still running \
             (IDEMPOTENCY_KEY_IN_PROGRESS): try again after `Retry-After`",
        ),
        (
            "422",
            "The Idempotency-Key was used for another request: another method, path or body \
             (IDEMPOTENCY_KEY_REUSED)",
        ),
    ] {
        match operation.responses.responses.get_mut(status) {
            Some(RefOr::T(response)) => {
                response.description = format!("{}; or: {description}", response.description);
            }
            Some(RefOr::Ref(_)) => {}
            None => {
                operation
                    .responses
                    .responses
                    .insert(status.to_owned(), problem(description).into());
            }
        }
    }
}

/// A page of records refers to its records' schema, so that a generated
/// client has one class per record (`RoleView`, not a copy per page).
fn pages_reference_their_items(components: &mut Components) {
    let names: Vec<String> = components.schemas.keys().cloned().collect();
    for (name, schema) in components.schemas.iter_mut() {
        let Some(item) = name.strip_prefix("Page_") else {
            continue;
        };
        if !names.iter().any(|n| n == item) {
            continue;
        }
        let RefOr::T(Schema::Object(page)) = schema else {
            continue;
        };
        if let Some(RefOr::T(Schema::Array(items))) = page.properties.get_mut("items") {
            items.items = ArrayItems::RefOrSchema(Box::new(Ref::from_schema_name(item).into()));
        }
    }
}

const PROBLEM_REF: &str = "#/components/schemas/Problem";

/// Every operation that takes a body reads it with [`crate::http::body::JsonInput`],
/// which answers 408 (too slow), 413 (over 1 MiB), 415 (not JSON) and 503
/// (no memory for it now) whatever the route.
fn document_body_errors(operation: &mut Operation) {
    if operation.request_body.is_none() {
        return;
    }
    for (status, description) in [
        (
            "408",
            "The body did not arrive within `server.body_timeout_ms` (REQUEST_TIMEOUT); the \
             connection is closed",
        ),
        (
            "503",
            "The store cannot answer now (STORAGE_UNAVAILABLE), or the memory for request bodies \
             is spent (SERVER_BUSY); nothing was done, try again after `Retry-After`",
        ),
        ("413", "The body is over 1 MiB (PAYLOAD_TOO_LARGE)"),
        (
            "415",
            "The body is not sent as application/json (UNSUPPORTED_MEDIA_TYPE)",
        ),
    ] {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| problem(description).into());
    }
}

/// A response whose body is a problem (RFC 9457).
fn problem(description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        PROBLEM_JSON,
        ContentBuilder::new()
            .schema(Some(Ref::new(PROBLEM_REF)))
            .build(),
    )
}

/// Every operation a bearer token calls may meet the token's rate limit
/// ([`crate::http::rate_limit`]) when the operator turned limits on.
fn document_rate_limit(operation: &mut Operation) {
    if operation.security.as_ref().is_none_or(Vec::is_empty) {
        return;
    }
    let retry_after = HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1)),
        )
        .description(Some("seconds until the token may send again"))
        .build();
    operation
        .responses
        .responses
        .entry("429".to_owned())
        .or_insert_with(|| {
            problem(
                "Over this token's rate limit (RATE_LIMITED; only when `api.rate_limit_per_second` \
                 is set); nothing was done",
            )
            .header("Retry-After", retry_after)
            .into()
        });
}

/// Error bodies are served as `application/problem+json`: an annotation's
/// `body = Problem` says which schema, this says which media type.
fn problems_as_problem_json(operation: &mut Operation) {
    for response in operation.responses.responses.values_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        let is_problem = |content: &utoipa::openapi::Content| matches!(&content.schema, Some(RefOr::Ref(r)) if r.ref_location == PROBLEM_REF);
        if response
            .content
            .get("application/json")
            .is_some_and(is_problem)
        {
            if let Some(content) = response.content.shift_remove("application/json") {
                response.content.insert(PROBLEM_JSON.to_owned(), content);
            }
        }
    }
}

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(operation_id = "get_openapi_document", tag = "meta", responses((status = 200, description = "OpenAPI 3.1 document", body = Object)))]
#[get("/openapi.json")]
async fn openapi_json(doc: web::Data<OpenApi>) -> HttpResponse {
    HttpResponse::Ok().json(doc.get_ref())
}
