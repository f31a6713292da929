//! `GET /event-types` and the OpenAPI `webhooks` section: the published
//! schemas, and that a payload drifting from them fails.

use serde_json::{json, Value};

use crate::event_schemas::{catalog, check_envelope};
use crate::helpers::{spawn_app, spawn_app_with, WEBHOOK_TEST_CONFIG};
use crate::receiver::TestReceiver;

/// Seed §6, in its order.
const SEED_EVENTS: [&str; 23] = [
    "decision.created",
    "decision.updated",
    "decision.status_changed",
    "decision.deleted",
    "memory.created",
    "memory.updated",
    "memory.deleted",
    "capsule.created",
    "capsule.updated",
    "capsule.deleted",
    "task.created",
    "task.status_changed",
    "task.completed",
    "pr.analysis_completed",
    "pr.violation_detected",
    "pr.results_accepted",
    "project.created",
    "project.import_completed",
    "project.import_failed",
    "member.added",
    "member.removed",
    "member.role_changed",
    "test.preflight",
];

#[actix_web::test]
async fn the_catalog_lists_the_23_events_in_the_seeds_order_with_their_schemas() {
    let app = spawn_app().await;
    let org = app.org("free").await;
    // Any authenticated user: the owner, and a plain member.
    let (_, member) = app.member(&org, &org.member_role).await;
    let page = app.get("/event-types", &member).await.expect(200).json();
    let ids: Vec<&str> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(ids, SEED_EVENTS);
    assert_eq!(page["next_cursor"], Value::Null);
    for entry in page["items"].as_array().expect("items") {
        assert!(entry["description"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(
            entry["schema"]["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(entry["schema"]["properties"]["event"]["const"], entry["id"]);
        assert_eq!(entry["schema"]["additionalProperties"], false);
    }
    // What the server publishes is what the test receiver checks against.
    assert_eq!(
        page["items"],
        serde_json::to_value(catalog()).expect("the catalog as JSON")
    );
    let violation = &page["items"][14]["schema"]["$defs"]["Violation"];
    assert!(violation["required"]
        .as_array()
        .expect("required")
        .contains(&json!("finding")));
    let import = &page["items"][18]["schema"]["$defs"]["Import"];
    assert!(import["required"]
        .as_array()
        .expect("required")
        .contains(&json!("failure_reason")));

    // Paged like every list; a bad limit is refused; no token, 401.
    let first = app
        .get("/event-types?limit=20", &member)
        .await
        .expect(200)
        .json();
    assert_eq!(first["items"].as_array().map(Vec::len), Some(20));
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let rest = app
        .get(&format!("/event-types?limit=20&cursor={cursor}"), &member)
        .await
        .expect(200)
        .json();
    assert_eq!(rest["items"][0]["id"], SEED_EVENTS[20]);
    assert_eq!(rest["items"].as_array().map(Vec::len), Some(3));
    let refused = app
        .get("/event-types?limit=0", &member)
        .await
        .expect(400)
        .json();
    assert_eq!(refused["code"], "VALIDATION_FAILED");
    app.get("/event-types", "not-a-token").await.expect(401);
}

#[actix_web::test]
async fn a_delivered_payload_validates_and_any_drift_from_its_schema_fails() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("free").await;
    app.setup_webhook(&org, &receiver.url, &["task.created"])
        .await;
    app.post(
        &org.path("/tasks"),
        &org.owner_token,
        json!({"title": "Ship it"}),
    )
    .await
    .expect(201);
    let received = receiver
        .wait_for(2, std::time::Duration::from_secs(10))
        .await;
    let body = received[1].body.clone();
    assert_eq!(check_envelope(&body), Vec::<String>::new());
    let envelope: Value = serde_json::from_slice(&body).expect("JSON");

    let drifted = |change: &dyn Fn(&mut Value)| {
        let mut changed = envelope.clone();
        change(&mut changed);
        check_envelope(&serde_json::to_vec(&changed).expect("bytes"))
    };
    let added = drifted(&|e| e["data"]["priority"] = json!("high"));
    assert_eq!(added.len(), 1, "{added:?}");
    let removed = drifted(&|e| {
        e["data"].as_object_mut().map(|d| d.remove("title"));
    });
    assert_eq!(removed.len(), 1, "{removed:?}");
    let retyped = drifted(&|e| e["data"]["status"] = json!(3));
    assert!(!retyped.is_empty());
    let renamed = drifted(&|e| e["event"] = json!("decision.created"));
    assert!(!renamed.is_empty());
    let bad_time = drifted(&|e| e["occurred_at"] = json!("yesterday"));
    assert!(!bad_time.is_empty(), "formats are checked");
}

#[actix_web::test]
async fn the_openapi_document_lists_every_event_as_a_webhook_the_preflight_test_too() {
    let app = spawn_app().await;
    let document = app
        .get("/openapi.json", &app.admin)
        .await
        .expect(200)
        .json();
    let webhooks = document["webhooks"]
        .as_object()
        .expect("a webhooks section");
    let ids: Vec<&str> = webhooks.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = SEED_EVENTS.to_vec();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    let components = &document["components"]["schemas"];
    for (id, item) in webhooks {
        let post = &item["post"];
        let schema = &post["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(schema["properties"]["event"]["const"], json!(id));
        let data = schema["properties"]["data"]["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .expect("data refers to a component");
        assert!(components[data].is_object(), "{id}: {data} is defined");
        let headers: Vec<&str> = post["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .filter(|p| p["in"] == "header")
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(
            headers,
            [
                "X-Service-Event",
                "X-Service-Delivery",
                "X-Service-Attempt",
                "X-Service-Signature",
                "webhook-id",
                "webhook-timestamp",
                "webhook-signature"
            ],
            "{id}"
        );
    }
}
