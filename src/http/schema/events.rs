//! The event catalog: for each event of seed §6, a description and the JSON
//! Schema (2020-12) of its whole envelope, and the OpenAPI `webhooks`
//! section. `data` is the OpenAPI component derived from the Rust type
//! that produces the payload, so a schema cannot drift from what is sent;
//! the test suite validates every envelope it receives against these.

use std::borrow::Cow;

use serde_json::{json, Map, Value};
use utoipa::openapi::schema::RefBuilder;
use utoipa::openapi::{Components, RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use crate::domain::event::EventKind;
use crate::domain::member::MembershipView;
use crate::domain::resources::analyses::{Analysis, Finding, Violation};
use crate::domain::resources::capsules::Capsule;
use crate::domain::resources::decisions::Decision;
use crate::domain::resources::imports::Import;
use crate::domain::resources::memories::Memory;
use crate::domain::resources::projects::Project;
use crate::domain::resources::tasks::Task;
use crate::webhooks::headers;
use crate::webhooks::preflight::PreflightData;

/// The JSON Schema dialect of the published schemas.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// One entry of `GET /event-types`.
#[derive(Clone, Debug, serde::Serialize, ToSchema)]
pub struct EventType {
    /// The event id.
    pub id: &'static str,
    /// When it fires (seed §6).
    pub description: &'static str,
    /// JSON Schema (2020-12) of the whole envelope.
    #[schema(value_type = Object)]
    pub schema: Value,
}

/// When `kind` fires, in the seed's words.
pub fn description(kind: EventKind) -> &'static str {
    match kind {
        EventKind::DecisionCreated => "A draft or proposed decision is added.",
        EventKind::DecisionUpdated => "A decision's statement, rationale, tags or links change.",
        EventKind::DecisionStatusChanged => "A decision's status moves.",
        EventKind::DecisionDeleted => "A decision is permanently removed.",
        EventKind::MemoryCreated => "A memory entry is captured.",
        EventKind::MemoryUpdated => "A memory's content or metadata changes.",
        EventKind::MemoryDeleted => "A memory is removed.",
        EventKind::CapsuleCreated => "A context capsule is created.",
        EventKind::CapsuleUpdated => "A capsule's body, scope or attachments change.",
        EventKind::CapsuleDeleted => "A capsule is removed.",
        EventKind::TaskCreated => "A task is opened.",
        EventKind::TaskStatusChanged => "A task's status moves.",
        EventKind::TaskCompleted => "A task is marked done.",
        EventKind::PrAnalysisCompleted => "Scanning of a pull request finished.",
        EventKind::PrViolationDetected => {
            "A pull-request change conflicts with an accepted decision; `finding` says which."
        }
        EventKind::PrResultsAccepted => "An admin accepted the proposed pull-request findings.",
        EventKind::ProjectCreated => "A project is added to the organization.",
        EventKind::ProjectImportCompleted => "A repository import finished successfully.",
        EventKind::ProjectImportFailed => "A repository import errored; `failure_reason` says why.",
        EventKind::MemberAdded => "A user joined the organization.",
        EventKind::MemberRemoved => "A user was removed.",
        EventKind::MemberRoleChanged => "A member was promoted or demoted.",
        EventKind::TestPreflight => {
            "The webhook Test action is used; sent at once whatever the subscription."
        }
    }
}

/// The component naming the type of `kind`'s `data`.
fn data_component(kind: EventKind) -> Cow<'static, str> {
    match kind {
        EventKind::DecisionCreated
        | EventKind::DecisionUpdated
        | EventKind::DecisionStatusChanged
        | EventKind::DecisionDeleted => Decision::name(),
        EventKind::MemoryCreated | EventKind::MemoryUpdated | EventKind::MemoryDeleted => {
            Memory::name()
        }
        EventKind::CapsuleCreated | EventKind::CapsuleUpdated | EventKind::CapsuleDeleted => {
            Capsule::name()
        }
        EventKind::TaskCreated | EventKind::TaskStatusChanged | EventKind::TaskCompleted => {
            Task::name()
        }
        EventKind::PrAnalysisCompleted | EventKind::PrResultsAccepted => Analysis::name(),
        EventKind::PrViolationDetected => Violation::name(),
        EventKind::ProjectCreated => Project::name(),
        EventKind::ProjectImportCompleted | EventKind::ProjectImportFailed => Import::name(),
        EventKind::MemberAdded | EventKind::MemberRemoved | EventKind::MemberRoleChanged => {
            MembershipView::name()
        }
        EventKind::TestPreflight => PreflightData::name(),
    }
}

/// Adds the payload types that no route returns to the document's components.
pub fn register(components: &mut Components) {
    let mut extra = vec![
        (Violation::name().into_owned(), Violation::schema()),
        (PreflightData::name().into_owned(), PreflightData::schema()),
    ];
    PreflightData::schemas(&mut extra);
    for (name, schema) in extra {
        components.schemas.entry(name).or_insert(schema);
    }
}

impl PartialSchema for Violation<'_> {
    /// The analysis' properties, and `finding`.
    fn schema() -> RefOr<Schema> {
        let mut schema = Analysis::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.description = Some(
                "The analysis, and the finding that conflicts with an accepted decision.".into(),
            );
            object.properties.insert(
                "finding".into(),
                RefBuilder::new()
                    .ref_location_from_schema_name(Finding::name())
                    .into(),
            );
            object.required.push("finding".into());
        }
        schema
    }
}

impl ToSchema for Violation<'_> {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Violation")
    }
}

/// The catalog, in the seed's order, from the OpenAPI document's components.
pub fn catalog(components: &Components) -> Vec<EventType> {
    let components = components_json(components);
    EventKind::ALL
        .iter()
        .map(|kind| EventType {
            id: kind.id(),
            description: description(*kind),
            schema: envelope_schema(*kind, &components),
        })
        .collect()
}

fn components_json(components: &Components) -> Map<String, Value> {
    match serde_json::to_value(&components.schemas) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

const COMPONENTS: &str = "#/components/schemas/";
const DEFS: &str = "#/$defs/";

/// The standalone schema of `kind`'s envelope: the components it uses are
/// copied under `$defs`, and every object is closed (no property the type
/// does not have, every property present), because our payloads always
/// carry every field.
fn envelope_schema(kind: EventKind, components: &Map<String, Value>) -> Value {
    let data = data_component(kind);
    let mut defs = Map::new();
    for name in ["Timestamp", data.as_ref()] {
        copy_component(name, components, &mut defs);
    }
    let mut schema = json!({
        "$schema": DIALECT,
        "title": kind.id(),
        "description": description(kind),
    });
    if let Value::Object(schema) = &mut schema {
        schema.extend(envelope(kind, DEFS));
        schema.insert("$defs".into(), Value::Object(defs));
    }
    schema
}

/// The envelope of seed 2.7 for `kind`, its schemas referred to under `refs`.
fn envelope(kind: EventKind, refs: &str) -> Map<String, Value> {
    let schema = json!({
        "type": "object",
        "properties": {
            "event": {"const": kind.id()},
            "occurred_at": {"$ref": format!("{refs}Timestamp")},
            "data": {"$ref": format!("{refs}{}", data_component(kind))},
        },
        "required": ["event", "occurred_at", "data"],
        "additionalProperties": false,
    });
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Copies component `name`, and those it refers to, into `defs`.
fn copy_component(name: &str, components: &Map<String, Value>, defs: &mut Map<String, Value>) {
    if defs.contains_key(name) {
        return;
    }
    let Some(schema) = components.get(name) else {
        return;
    };
    let mut schema = schema.clone();
    let mut refers = Vec::new();
    close(&mut schema, &mut refers);
    defs.insert(name.to_owned(), schema);
    for other in refers {
        copy_component(&other, components, defs);
    }
}

/// Rewrites component references to `$defs` (collecting their names) and
/// closes every object that lists its properties.
fn close(schema: &mut Value, refers: &mut Vec<String>) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::String(target)) = object.get_mut("$ref") {
                if let Some(name) = target.strip_prefix(COMPONENTS) {
                    refers.push(name.to_owned());
                    *target = format!("{DEFS}{name}");
                }
            }
            if let Some(Value::Object(properties)) = object.get("properties") {
                let names: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
                object.insert("required".into(), Value::Array(names));
                object.insert("additionalProperties".into(), Value::Bool(false));
            }
            for value in object.values_mut() {
                close(value, refers);
            }
        }
        Value::Array(items) => {
            for item in items {
                close(item, refers);
            }
        }
        _ => {}
    }
}

/// The OpenAPI 3.1 `webhooks` section: one entry per subscribable event,
/// its body and the headers every delivery carries.
pub fn webhooks() -> Value {
    let headers = [
        (headers::X_SERVICE_EVENT, "The event id."),
        (
            headers::X_SERVICE_DELIVERY,
            "The delivery id, the same on every attempt of a delivery: deduplicate on it.",
        ),
        (headers::X_SERVICE_ATTEMPT, "1, or 2 for the retry."),
        (
            headers::X_SERVICE_SIGNATURE,
            "sha256=<hex HMAC-SHA256 of the raw body, keyed with the signing secret>.",
        ),
        (headers::WEBHOOK_ID, "Standard Webhooks: the delivery id."),
        (
            headers::WEBHOOK_TIMESTAMP,
            "Standard Webhooks: unix seconds when the attempt started.",
        ),
        (
            headers::WEBHOOK_SIGNATURE,
            "Standard Webhooks: v1,<base64 HMAC-SHA256 of \"{webhook-id}.{webhook-timestamp}.{body}\">.",
        ),
    ];
    let parameters: Vec<Value> = headers
        .iter()
        .map(|(name, description)| {
            json!({"name": name, "in": "header", "required": true, "description": description,
                   "schema": {"type": "string"}})
        })
        .collect();
    let mut webhooks = Map::new();
    // `test.preflight` too: never subscribed, but the Test button sends it
    // to the endpoint, signed like every other event.
    for kind in EventKind::ALL.iter() {
        let body = Value::Object(envelope(*kind, COMPONENTS));
        let responses = if *kind == EventKind::TestPreflight {
            json!({
                "2XX": {"description": "The Test passes. Anything else, a timeout or no answer fails it."},
                "410": {"description": "Gone: the Test fails; the endpoint's status does not change."}
            })
        } else {
            json!({
                "2XX": {"description": "Delivered. Anything else, a timeout or no answer is a failed attempt, retried once. An endpoint whose every attempt fails for `webhooks.disable_after_failing_ms`, with at least `webhooks.disable_after_failures` attempts, is disabled (`failing`)."},
                "410": {"description": "Gone: the endpoint is disabled at once (`gone`): nothing more is sent to it, and new events are logged skipped (`endpoint disabled`), until a passing Test and a save."}
            })
        };
        webhooks.insert(
            kind.id().to_owned(),
            json!({"post": {
                "operationId": format!("webhook_{}", kind.id().replace('.', "_")),
                // Sent by this service, signed (the headers above), not called with a token.
                "security": [],
                "summary": description(*kind),
                "tags": ["webhook events"],
                "parameters": parameters,
                "requestBody": {"required": true, "content": {"application/json": {"schema": body}}},
                "responses": responses,
            }}),
        );
    }
    Value::Object(webhooks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn components() -> Components {
        crate::http::routes::openapi::document()
            .components
            .unwrap_or_default()
    }

    #[test]
    fn every_event_has_a_closed_envelope_whose_references_resolve() {
        let catalog = catalog(&components());
        assert_eq!(catalog.len(), 23);
        for entry in &catalog {
            let Some(defs) = entry.schema["$defs"].as_object() else {
                panic!("{}: no $defs", entry.id);
            };
            let text = entry.schema.to_string();
            assert!(!text.contains(COMPONENTS), "{}: {text}", entry.id);
            for (i, _) in text.match_indices(DEFS) {
                let name: String = text[i + DEFS.len()..]
                    .chars()
                    .take_while(|c| *c != '"')
                    .collect();
                assert!(defs.contains_key(&name), "{}: {name} is defined", entry.id);
            }
            let data = entry.schema["properties"]["data"]["$ref"]
                .as_str()
                .and_then(|r| r.strip_prefix(DEFS))
                .unwrap_or_default();
            assert_eq!(defs[data]["additionalProperties"], false, "{}", entry.id);
        }
    }

    #[test]
    fn a_violation_carries_its_finding_and_a_failed_import_its_reason() {
        let catalog = catalog(&components());
        let find = |id: &str| {
            catalog
                .iter()
                .find(|e| e.id == id)
                .map(|e| e.schema.clone())
                .unwrap_or_default()
        };
        let violation = find("pr.violation_detected");
        let required = &violation["$defs"]["Violation"]["required"];
        assert!(required
            .as_array()
            .is_some_and(|r| r.contains(&json!("finding"))));
        let failed = find("project.import_failed");
        assert!(failed["$defs"]["Import"]["properties"]["failure_reason"].is_object());
    }
}
