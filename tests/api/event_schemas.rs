//! The published event schemas, compiled once per test run: the shared
//! receiver checks every envelope it gets against its event's schema, so a
//! payload that drifts from the catalog fails whichever test delivered it.

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::Value;

/// The catalog `GET /event-types` serves, from the same function.
pub fn catalog() -> &'static [rolecall::http::schema::events::EventType] {
    static CATALOG: OnceLock<Vec<rolecall::http::schema::events::EventType>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let document = rolecall::http::routes::openapi::document();
        rolecall::http::schema::events::catalog(&document.components.unwrap_or_default())
    })
}

fn validators() -> &'static HashMap<&'static str, Validator> {
    static VALIDATORS: OnceLock<HashMap<&'static str, Validator>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        catalog()
            .iter()
            .map(|entry| (entry.id, validator(&entry.schema)))
            .collect()
    })
}

/// A validator of `schema` that also checks formats (date-time, uuid).
pub fn validator(schema: &Value) -> Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|err| panic!("a valid schema: {err}"))
}

/// What is wrong with `body` as an envelope of its event (nothing when it
/// validates).
pub fn check_envelope(body: &[u8]) -> Vec<String> {
    let Ok(envelope) = serde_json::from_slice::<Value>(body) else {
        return vec![format!("not JSON: {}", String::from_utf8_lossy(body))];
    };
    let Some(event) = envelope["event"].as_str() else {
        return vec![format!("no event: {envelope}")];
    };
    let Some(validator) = validators().get(event) else {
        return vec![format!("{event} is not in the catalog")];
    };
    validator
        .iter_errors(&envelope)
        .map(|err| format!("{event}: {err} at {}", err.instance_path()))
        .collect()
}
