//! Organization actors start on first use, stop when idle, and come back
//! transparently with the state they left.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{eventually, spawn_app_with};

#[actix_web::test]
async fn idle_org_actors_stop_and_restart_on_demand() {
    let app = spawn_app_with(&[("ROLECALL_ACTORS__ORG_IDLE_TIMEOUT_MS", "100")]).await;
    let org = app.org("enterprise").await;
    assert_eq!(
        app.registry.live_actors(),
        0,
        "reads and org creation start no actor"
    );

    let first = app.role(&org, "First", &["org:team:read"]).await;
    assert_eq!(
        app.registry.live_actors(),
        1,
        "the first mutation starts the org's actor"
    );
    eventually(Duration::from_secs(5), "the idle actor to stop", || async {
        (app.registry.live_actors() == 0).then_some(())
    })
    .await;

    // A new actor continues from the published state: uniqueness still holds
    // against the role the stopped actor created, and new writes land.
    let conflict = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "FIRST"}),
        )
        .await;
    conflict.problem(409, "NAME_CONFLICT");
    assert_eq!(app.registry.live_actors(), 1);
    let second = app.role(&org, "Second", &[]).await;
    let roles = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    let ids: Vec<&str> = roles["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(&ids[2..], &[first.as_str(), second.as_str()]);
}
