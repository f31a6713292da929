//! The walkthrough of the README, end to end.

use serde_json::json;

use crate::helpers::spawn_app;

#[actix_web::test]
async fn healthz_and_walkthrough() {
    let app = spawn_app().await;
    let health = app
        .call(actix_web::http::Method::GET, "/healthz", None, None)
        .await
        .expect(200);
    assert_eq!(health.json(), json!({"status": "ok"}));

    let org = app.org("enterprise").await;
    let role = app
        .role(&org, "Reviewer", &["org:decisions:read", "org:team:read"])
        .await;
    let (user, token) = app.member(&org, &role).await;
    let me = app.get("/me", &token).await.expect(200).json();
    assert_eq!(me["user"]["id"], json!(user));
    assert_eq!(
        me["memberships"],
        json!([{"organization_id": org.id, "role_id": role, "role_name": "Reviewer"}])
    );
}
