//! OpenAPI schemas: the wire forms of our own scalar types (timestamps, ids,
//! permission sets), which derived schemas of records reference; the
//! schemas of request-body fields ([`fields`]); and the schemas of request
//! bodies ([`bodies`]), which say exactly what the server accepts.

pub mod bodies;
pub mod events;
pub mod fields;

use std::borrow::Cow;

use utoipa::openapi::schema::{ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};

use crate::domain::permissions::PermissionSet;
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, ResourceId, RoleId, TestId, TokenId, UserId};
use crate::time::Timestamp;

fn string_schema(format: KnownFormat, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(format)))
        .description(Some(description))
        .into()
}

macro_rules! string_schema {
    ($ty:ty, $format:expr, $description:literal) => {
        impl utoipa::PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                string_schema($format, $description)
            }
        }
        impl utoipa::ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($ty))
            }
        }
    };
}

string_schema!(
    Timestamp,
    KnownFormat::DateTime,
    "RFC 3339 UTC timestamp with milliseconds"
);
string_schema!(OrgId, KnownFormat::Uuid, "organization id (UUID v7)");
string_schema!(UserId, KnownFormat::Uuid, "user id (UUID v7)");
string_schema!(RoleId, KnownFormat::Uuid, "role id (UUID v7)");
string_schema!(TokenId, KnownFormat::Uuid, "token id (UUID v7)");
string_schema!(AuditId, KnownFormat::Uuid, "audit record id (UUID v7)");
string_schema!(DeliveryId, KnownFormat::Uuid, "delivery id (UUID v7)");
string_schema!(LogId, KnownFormat::Uuid, "delivery-log record id (UUID v7)");
string_schema!(TestId, KnownFormat::Uuid, "webhook test id (UUID v7)");
string_schema!(ResourceId, KnownFormat::Uuid, "resource id (UUID v7)");

impl utoipa::PartialSchema for PermissionSet {
    fn schema() -> RefOr<Schema> {
        ArrayBuilder::new()
            .items(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^org:[a-z]+:[a-z]+$")),
            )
            .description(Some("permission keys, sorted"))
            .into()
    }
}

impl utoipa::ToSchema for PermissionSet {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("PermissionSet")
    }
}

impl utoipa::PartialSchema for crate::domain::resources::fields::JsonObject {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .description(Some("any JSON object, at most 16 KiB"))
            .into()
    }
}

impl utoipa::ToSchema for crate::domain::resources::fields::JsonObject {}
