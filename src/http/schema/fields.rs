//! Schemas of request-body fields that say exactly what the server accepts
//! (used with `#[schema(schema_with = …)]`), so that a client, or a fuzzer,
//! reading the document can tell a valid body from an invalid one. Patterns
//! are ECMA-262 regular expressions, as JSON Schema asks.

use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, KnownFormat, ObjectBuilder};
use utoipa::openapi::schema::{OneOfBuilder, SchemaFormat, SchemaType, Type};
use utoipa::openapi::Schema;

use crate::domain::event::EventKind;
use crate::domain::names::{EMAIL_MAX, ROLE_DESCRIPTION_MAX, ROLE_NAME_MAX};
use crate::domain::permissions::Permission;
use crate::domain::resources::fields::{
    BODY_MAX, LINKS_MAX, TAGS_MAX, TAG_MAX, TITLE_MAX, URL_MAX,
};

// Character classes, written without `\u` escapes: some generators
// (a zod one, for one) decode them into the characters themselves inside a
// regular-expression literal, where U+2028, U+2029 and the control
// characters are syntax errors. `\s`, `\S` and `\xHH` compile everywhere.

/// What `str::trim` removes, Unicode White_Space: Python's `\s` (which
/// schemathesis generates from) but the separators U+001C..U+001F. In
/// ECMA-262 the same class leaves out U+0085 and takes U+FEFF; the server
/// is the judge, the pattern a close description.
const SPACE: &str = r"[^\S\x1c-\x1f]";
/// Neither white space nor a control character (Unicode Cc, what
/// `char::is_control` refuses).
const VISIBLE: &str = r"[^\s\x00-\x1f\x7f-\x9f]";
/// Not a control character.
const NOT_CONTROL: &str = r"[^\x00-\x1f\x7f-\x9f]";

/// The regex body of a text that, trimmed, has 1..=`max` characters and
/// no control character (`names::display_name`, `fields::short_text`).
fn trimmed_body(max: usize) -> String {
    format!(
        "{SPACE}*{VISIBLE}(?:{NOT_CONTROL}{{0,{}}}{VISIBLE})?{SPACE}*",
        max.saturating_sub(2)
    )
}

fn text(pattern: String, description: String) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .description(Some(description))
}

/// Trimmed, 1..=`max` characters, no control characters.
pub fn trimmed(max: usize) -> ObjectBuilder {
    text(
        format!("^{}$", trimmed_body(max)),
        format!("1..={max} characters once trimmed, no control characters"),
    )
}

/// A title, a display name, a project name or a repository (1..=200).
pub fn title() -> Schema {
    trimmed(TITLE_MAX).into()
}

/// A role name (1..=64).
pub fn role_name() -> Schema {
    trimmed(ROLE_NAME_MAX)
        .description(Some(format!(
            "1..={ROLE_NAME_MAX} characters once trimmed, no control characters; \
             unique in the organization after NFKC normalization and case folding"
        )))
        .into()
}

/// A role description: at most 500 characters, any.
pub fn role_description() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(ROLE_DESCRIPTION_MAX))
        .description(Some(format!("at most {ROLE_DESCRIPTION_MAX} characters")))
        .into()
}

/// A long text: at most 64 KiB of UTF-8 (so at most 65536 characters).
pub fn body_text() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(BODY_MAX))
        .description(Some("at most 64 KiB of UTF-8"))
        .into()
}

/// A URL-like text (repository URL, import source): 1..=2048 characters.
pub fn url_text() -> Schema {
    trimmed(URL_MAX).into()
}

/// A finding's summary or an import's failure reason: 1..=2000 characters.
pub fn summary() -> Schema {
    trimmed(2000).into()
}

/// A capsule's scope: blank (no scope) or 1..=200 characters.
pub fn scope() -> Schema {
    text(
        format!("^(?:{SPACE}*|{})$", trimmed_body(TITLE_MAX)),
        format!(
            "blank for none, or 1..={TITLE_MAX} characters once trimmed, no control characters"
        ),
    )
    .into()
}

fn list(items: ObjectBuilder, max_items: usize) -> Schema {
    ArrayBuilder::new()
        .items(items)
        .max_items(Some(max_items))
        .into()
}

/// Up to 20 tags of 1..=50 characters.
pub fn tags() -> Schema {
    list(trimmed(TAG_MAX), TAGS_MAX)
}

/// Up to 20 links or attachments of 1..=2048 characters.
pub fn links() -> Schema {
    list(trimmed(URL_MAX), LINKS_MAX)
}

/// An email address: one `@` between two non-empty parts, no spaces or
/// control characters, at most 254 bytes once trimmed. The server takes
/// any non-space characters; the pattern admits visible ASCII, where
/// characters and bytes agree, so that its length bound is exact.
pub fn email() -> Schema {
    let part = "[!-?A-~]+";
    text(
        format!("^{SPACE}*(?=[!-~]{{3,{EMAIL_MAX}}}{SPACE}*$){part}@{part}{SPACE}*$"),
        format!(
            "an email address, at most {EMAIL_MAX} bytes once trimmed; unique case-insensitively"
        ),
    )
    .into()
}

/// An id in a body: the hyphenated UUID form.
pub fn uuid(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
        .description(Some(description))
}

/// A role of this organization.
pub fn role_id() -> Schema {
    uuid("a role of this organization (UUID)").into()
}

/// A user.
pub fn user_id() -> Schema {
    uuid("a user (UUID)").into()
}

/// A project of this organization.
pub fn project_id() -> Schema {
    uuid("a project of this organization (UUID)").into()
}

/// A webhook test.
pub fn test_id() -> Schema {
    uuid("a passed test of the last 15 minutes, not used before (UUID)").into()
}

fn one_of_strings<'a>(values: impl IntoIterator<Item = &'a str>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.into_iter().collect::<Vec<_>>()))
}

/// A permission key of the catalog.
pub fn permission_key() -> Schema {
    one_of_strings(Permission::ALL.iter().map(|p| p.key())).into()
}

/// Permission keys of the catalog.
pub fn permission_keys() -> Schema {
    ArrayBuilder::new()
        .items(one_of_strings(Permission::ALL.iter().map(|p| p.key())))
        .description(Some("keys of the catalog (GET /permissions)"))
        .into()
}

/// 1 to `max` permission keys of the catalog (a batch check).
pub fn checked_permission_keys(max: usize) -> Schema {
    ArrayBuilder::new()
        .items(one_of_strings(Permission::ALL.iter().map(|p| p.key())))
        .min_items(Some(1))
        .max_items(Some(max))
        .description(Some("keys of the catalog (GET /permissions)"))
        .into()
}

/// Event ids a webhook can subscribe to (every event but `test.preflight`).
pub fn event_ids() -> Schema {
    let ids = EventKind::ALL
        .iter()
        .filter(|kind| **kind != EventKind::TestPreflight)
        .map(|kind| kind.id());
    ArrayBuilder::new().items(one_of_strings(ids)).into()
}

/// Any event id (delivery-log filter).
pub fn event_id() -> Schema {
    one_of_strings(EventKind::ALL.iter().map(|kind| kind.id())).into()
}

/// A webhook URL: the pattern admits https URLs whose host is a DNS name
/// (of up to three labels, the last not numeric, so never an address
/// literal), which the server judges when the test connects. The server
/// accepts more (public address literals, queries; http:// when the
/// operator allows it), so the pattern is what a client can rely on.
pub fn webhook_url() -> Schema {
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    let top = "[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    text(
        format!(
            "^https://(?:{label}\\.){{1,2}}{top}(?::[1-9][0-9]{{0,3}})?\
             (?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{{2}})*)?$"
        ),
        "an absolute https URL of at most 2048 characters; hosts that are, or resolve to, \
         loopback, private or other non-public addresses are refused"
            .to_owned(),
    )
    .max_length(Some(URL_MAX))
    .into()
}

/// `POST …/decisions`' `status`: a new decision is DRAFT or PENDING.
pub fn new_decision_status() -> Schema {
    one_of_strings(["DRAFT", "PENDING"])
        .description(Some("`DRAFT` (default) or `PENDING`"))
        .into()
}

/// Any JSON object of at most 16 KiB.
pub fn metadata() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some("any JSON object, at most 16 KiB"))
        .into()
}

/// The body of `POST …/imports/{id}/result`: `failure_reason` only with `failed`.
pub fn import_result() -> Schema {
    let completed = ObjectBuilder::new()
        .property("status", one_of_strings(["completed"]))
        .required("status")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let failed = ObjectBuilder::new()
        .property("status", one_of_strings(["failed"]))
        .required("status")
        .property(
            "failure_reason",
            trimmed(2000).description(Some("why it failed (default `unknown error`)")),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    OneOfBuilder::new()
        .item(completed)
        .item(failed)
        .description(Some(
            "`completed`, or `failed` with an optional `failure_reason`",
        ))
        .into()
}

/// When a role assignment ends: a date-time in the future, at most a year
/// ahead, never on Owner (the server judges those against its clock); `null`
/// for none.
pub fn role_expires_at() -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
        .description(Some(
            "when the role assignment ends and the member falls back to Member: RFC 3339, \
             in the future, at most one year ahead, not on Owner; null: never",
        ))
        .into()
}

/// The body of `PATCH …/members/{user_id}`: `role_id`, `role_expires_at` or both.
pub fn change_member() -> Schema {
    ObjectBuilder::new()
        .property("role_id", role_id())
        .property("role_expires_at", role_expires_at())
        .min_properties(Some(1))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .description(Some(
            "a new role, a new end of the assignment (null clears it), or both; a new role \
             without `role_expires_at` runs until changed",
        ))
        .into()
}

/// The body of `POST …/members`: exactly one of `user_id` and `email`, `role_id`,
/// and optionally `role_expires_at`.
pub fn add_member() -> Schema {
    let by = |key: &str, schema: Schema| {
        ObjectBuilder::new()
            .property(key, schema)
            .required(key)
            .property("role_id", role_id())
            .required("role_id")
            .property("role_expires_at", role_expires_at())
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
    };
    OneOfBuilder::new()
        .item(by("user_id", user_id()))
        .item(by("email", email()))
        .description(Some(
            "exactly one of `user_id` and `email`, and the role to give",
        ))
        .into()
}
