//! One event from request to subscriber.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{spawn_app_with, WEBHOOK_TEST_CONFIG};
use crate::receiver::TestReceiver;

on_both_engines! {
async fn a_member_event_reaches_the_subscriber() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    assert!(secret.starts_with("whsec_"));
    let preflight = receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(preflight[0].header("x-service-event"), "test.preflight");

    let (user, _) = app.member(&org, &org.member_role).await;
    let received = receiver.wait_for(2, Duration::from_secs(5)).await;
    let delivery = &received[1];
    assert_eq!(delivery.header("x-service-event"), "member.added");
    assert_eq!(delivery.header("x-service-attempt"), "1");
    let membership = app
        .get(&org.path(&format!("/members/{user}")), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(delivery.json()["data"], membership);
    assert_eq!(delivery.json()["event"], json!("member.added"));
}
}
