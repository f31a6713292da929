//! The routes workspace resources share: create, list, get, update and
//! delete (CONTRACT §7), as one generic set of handlers. A resource
//! declares what differs ([`Listed`] and [`Routed`]: its keys, words,
//! bodies, transitions and events), and [`Reads`] or [`Crud`] register its
//! routes and their OpenAPI entries from that.

use std::future::Future;
use std::marker::PhantomData;

use actix_web::dev::{AppService, HttpServiceFactory};
use actix_web::http::{Method, StatusCode};
use actix_web::{
    guard, web, FromRequest, Handler, HttpRequest, HttpResponse, Resource as Route, Responder,
};
use serde::de::DeserializeOwned;
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, Parameter, ParameterBuilder, ParameterIn, PathItem,
    Paths, PathsBuilder,
};
use utoipa::openapi::request_body::{RequestBody, RequestBodyBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, ResponseBuilder};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::OpenApiFactory;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::{Changed, Resource};
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::idempotency::{respond_with, Keyed};
use crate::http::org_routes::{get_resource, list, locate};
use crate::http::paging::{IdPaging, Page};
use crate::http::problem::Problem;
use crate::http::route_table::RouteSpec;
use crate::http::AppContext;
use crate::workspace::Workspace;

/// One route of a resource: the keys it needs, and what the document says of it.
#[derive(Clone, Copy, Debug)]
pub struct Doc {
    /// Its permission entry (CONTRACT §11).
    pub route: RouteSpec,
    /// The document's summary.
    pub summary: &'static str,
    /// Error statuses of its own that the document declares besides the
    /// common ones (409 for a refused transition, 422 for an unknown reference).
    pub also: &'static [u16],
}

impl Doc {
    /// A route with only the common errors.
    pub const fn new(route: RouteSpec, summary: &'static str) -> Self {
        Doc {
            route,
            summary,
            also: &[],
        }
    }

    /// The same route, declaring `also` besides.
    pub const fn also(self, also: &'static [u16]) -> Self {
        Doc { also, ..self }
    }
}

/// A resource that can be listed and shown: `GET …` and `GET …/{id}`.
pub trait Listed: Resource + ToSchema {
    /// The document's tag.
    const TAG: &'static str;
    /// One of it, in operation ids (`get_memory`).
    const ONE: &'static str;
    /// Many of it, in operation ids (`list_memories`).
    const MANY: &'static str;
    /// `GET …`, newest first.
    const LIST: Doc;
    /// `GET …/{id}`.
    const GET: Doc;
}

/// What an update body does to a resource's current value: the new value
/// and the events it fires, or a refusal.
pub type Patch<T> = Box<dyn Fn(T) -> Result<Changed<T>, ApiError>>;

/// A resource that can also be created, updated (`PATCH …/{id}`) and deleted.
pub trait Routed: Listed {
    /// The create body.
    type Create: DeserializeOwned + ToSchema;
    /// The update body.
    type Update: DeserializeOwned + ToSchema;
    /// `POST …` (201).
    const CREATE: Doc;
    /// `PATCH …/{id}`.
    const UPDATE: Doc;
    /// `DELETE …/{id}` (204).
    const DELETE: Doc;
    /// Fired by a delete, with the resource's last representation.
    const DELETED: Option<EventKind>;

    /// The resource a valid create body makes, with its events. It may
    /// read the organization's other resources (a task's project).
    fn created(
        body: Self::Create,
        access: &OrgAccess,
        workspace: &Workspace<'_>,
    ) -> impl Future<Output = Result<Changed<Self>, ApiError>>;

    /// What a valid update body does.
    fn patch(body: Self::Update) -> Result<Patch<Self>, ApiError>;
}

/// An edit: `apply` gives the new value; when it differs, the resource is
/// touched and `event` fires (see [`Changed::edited`]).
pub fn edit<T: Resource>(
    apply: impl Fn(&T) -> Result<T, ApiError> + 'static,
    event: Option<EventKind>,
) -> Patch<T> {
    Box::new(move |current: T| {
        let next = apply(&current)?;
        Ok(Changed::edited(current, next, event))
    })
}

async fn create<R: Routed>(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    access.allow(R::CREATE.route)?;
    let body = input.parse::<R::Create>()?;
    let workspace = access.workspace(&ctx);
    let changed = R::created(body, &access, &workspace).await?;
    let keyed = keyed.as_deref();
    let answer = respond_with(keyed, StatusCode::CREATED);
    Ok(workspace.create(changed, answer).await?.into_response())
}

async fn list_all<R: Listed>(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(R::LIST.route)?;
    list::<R>(&ctx, &access, &req, None).await
}

async fn get_one<R: Listed>(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    get_resource::<R>(&ctx, &access, &path.1, R::GET.route).await
}

async fn update<R: Routed>(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<R>(&ctx, &access, &path.1, R::UPDATE.route)
        .await?
        .id();
    let patch = R::patch(input.parse::<R::Update>()?)?;
    let updated = access.workspace(&ctx).update(id, patch).await?;
    Ok(HttpResponse::Ok().json(updated))
}

async fn remove<R: Routed>(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let current = locate::<R>(&ctx, &access, &path.1, R::DELETE.route).await?;
    access
        .workspace(&ctx)
        .delete::<R>(current.id(), R::DELETED)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Registers `GET …` and `GET …/{id}` of `R`, relative to its scope.
pub struct Reads<R>(PhantomData<R>);

/// `R`'s list and get routes.
pub fn reads<R: Listed>() -> Reads<R> {
    Reads(PhantomData)
}

impl<R: Listed> HttpServiceFactory for Reads<R> {
    fn register(self, config: &mut AppService) {
        route(config, "", Method::GET, list_all::<R>);
        route(config, "/{id}", Method::GET, get_one::<R>);
    }
}

impl<R: Listed> OpenApiFactory for Reads<R> {
    fn paths(&self) -> Paths {
        PathsBuilder::new()
            .path("", PathItem::new(HttpMethod::Get, list_operation::<R>()))
            .path(
                "/{id}",
                PathItem::new(HttpMethod::Get, get_operation::<R>()),
            )
            .build()
    }

    fn schemas(&self, schemas: &mut Vec<(String, RefOr<Schema>)>) {
        collect::<R>(schemas);
        schemas.push((
            page_name::<R>(),
            <Page<R> as utoipa::PartialSchema>::schema(),
        ));
        collect::<Problem>(schemas);
    }
}

/// Registers every route [`Routed`] describes for `R`, relative to its scope.
pub struct Crud<R>(PhantomData<R>);

/// `R`'s create, list, get, update and delete routes.
pub fn crud<R: Routed>() -> Crud<R> {
    Crud(PhantomData)
}

impl<R: Routed> HttpServiceFactory for Crud<R> {
    fn register(self, config: &mut AppService) {
        route(config, "", Method::POST, create::<R>);
        reads::<R>().register(config);
        route(config, "/{id}", Method::PATCH, update::<R>);
        route(config, "/{id}", Method::DELETE, remove::<R>);
    }
}

/// Registers `handler` for `method` on `path` alone, so that a request of
/// another method goes on to the next registration, as with `#[get]` and
/// its kin.
fn route<F, Args>(config: &mut AppService, path: &str, method: Method, handler: F)
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    Route::new(path)
        .guard(guard::Method(method))
        .to(handler)
        .register(config);
}

impl<R: Routed> OpenApiFactory for Crud<R> {
    fn paths(&self) -> Paths {
        let id = [path_param("org_id"), path_param("id")];
        let create = operation::<R>(R::CREATE, format!("create_{}", R::ONE))
            .parameter(path_param("org_id"))
            .request_body(Some(body::<R::Create>()))
            .response("201", outcome::<R>())
            .build();
        let update = operation::<R>(R::UPDATE, format!("update_{}", R::ONE))
            .parameters(Some(id.clone()))
            .request_body(Some(body::<R::Update>()))
            .response("200", outcome::<R>())
            .build();
        let delete = operation::<R>(R::DELETE, format!("delete_{}", R::ONE))
            .parameters(Some(id))
            .response("204", ResponseBuilder::new().description("Deleted"))
            .build();
        let mut paths = reads::<R>().paths();
        paths.merge(
            PathsBuilder::new()
                .path(
                    "",
                    PathItem::new(HttpMethod::Post, with_errors(create, R::CREATE, true)),
                )
                .path(
                    "/{id}",
                    PathItem::new(HttpMethod::Patch, with_errors(update, R::UPDATE, true)),
                )
                .path(
                    "/{id}",
                    PathItem::new(HttpMethod::Delete, with_errors(delete, R::DELETE, false)),
                )
                .build(),
        );
        paths
    }

    fn schemas(&self, schemas: &mut Vec<(String, RefOr<Schema>)>) {
        collect::<R::Create>(schemas);
        collect::<R::Update>(schemas);
        reads::<R>().schemas(schemas);
    }
}

fn list_operation<R: Listed>() -> Operation {
    let list = operation::<R>(R::LIST, format!("list_{}", R::MANY))
        .parameter(path_param("org_id"))
        .parameters(Some(IdPaging::into_params(|| None)))
        .response("200", json_response(page_name::<R>()))
        .build();
    with_errors(list, R::LIST, true)
}

fn get_operation<R: Listed>() -> Operation {
    let get = operation::<R>(R::GET, format!("get_{}", R::ONE))
        .parameters(Some([path_param("org_id"), path_param("id")]))
        .response("200", outcome::<R>())
        .build();
    with_errors(get, R::GET, false)
}

/// An operation of `R`'s with its id, tag, summary and bearer security.
fn operation<R: Listed>(doc: Doc, id: String) -> OperationBuilder {
    OperationBuilder::new()
        .tag(R::TAG)
        .summary(Some(doc.summary))
        .operation_id(Some(id))
        .security(SecurityRequirement::new("bearer", Vec::<String>::new()))
}

/// `operation` declaring the errors every resource route may answer (400
/// when it reads a body or a query), then the route's own.
fn with_errors(mut operation: Operation, doc: Doc, reads_input: bool) -> Operation {
    let common: &[u16] = if reads_input {
        &[400, 401, 403, 404]
    } else {
        &[401, 403, 404]
    };
    let mut statuses = common.to_vec();
    statuses.extend(doc.also);
    for status in statuses {
        operation
            .responses
            .responses
            .insert(status.to_string(), outcome::<Problem>().into());
    }
    operation
}

/// A path parameter the document types as a plain string.
fn path_param(name: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build()
}

/// A JSON body of `T`'s schema.
fn body<T: ToSchema>() -> RequestBody {
    RequestBodyBuilder::new()
        .content("application/json", json_of(T::name()))
        .required(Some(Required::True))
        .build()
}

/// A response whose JSON body is `T`.
fn outcome<T: ToSchema>() -> ResponseBuilder {
    json_response(T::name())
}

/// A response whose JSON body is the schema `name`.
fn json_response(name: impl Into<String>) -> ResponseBuilder {
    ResponseBuilder::new()
        .description("")
        .content("application/json", json_of(name))
}

fn json_of(name: impl Into<String>) -> utoipa::openapi::Content {
    ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(name)))
        .build()
}

/// The name of `Page<R>`'s schema, as utoipa composes a generic's name
/// (`Page_Memory`): `Page::<R>::name()` is `Page` whatever `R`.
fn page_name<R: ToSchema>() -> String {
    format!("{}_{}", Page::<R>::name(), R::name())
}

/// `T`'s schema and those it refers to, for the document's components.
fn collect<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}
