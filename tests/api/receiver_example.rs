//! The README's example receiver (`examples/receiver.rs`) against real
//! rolecall deliveries and forged ones.

use std::time::{Duration, Instant};

use actix_web::http::Method;
use serde_json::json;

use crate::helpers::{send, spawn_app_with, Req, WEBHOOK_TEST_CONFIG};

#[path = "../../examples/receiver.rs"]
#[allow(dead_code)]
mod example;

#[actix_web::test]
async fn the_example_receiver_accepts_real_deliveries_and_refuses_forgeries() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let org = app.org("enterprise").await;

    // Learn the secret with a throwaway receiver, then point the endpoint at the example.
    let probe = crate::receiver::TestReceiver::start().await;
    let test = app
        .post(
            &org.path("/webhook/test"),
            &org.owner_token,
            json!({"url": probe.url, "events": ["member.added"]}),
        )
        .await
        .expect(200)
        .json();
    let secret = test["secret"].as_str().unwrap().to_owned();
    let receiver = actix_web::web::Data::new(example::Receiver::new(secret.clone()));
    let (server, port) = example::server(receiver.clone(), "127.0.0.1:0").unwrap();
    actix_web::rt::spawn(server);
    let url = format!("http://127.0.0.1:{port}/hook");
    app.call(
        Method::PUT,
        &org.path("/webhook"),
        Some(&org.owner_token),
        Some(json!({"test_id": test["test_id"]})),
    )
    .await
    .expect(200);
    // The saved URL is the tested one; retest against the example so PUT saves it (same secret).
    let retest = app
        .post(
            &org.path("/webhook/test"),
            &org.owner_token,
            json!({"url": url, "events": ["member.added"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(
        retest["passed"],
        json!(true),
        "the example must accept a real preflight: {retest}"
    );
    assert!(retest.get("secret").is_none());
    app.call(
        Method::PUT,
        &org.path("/webhook"),
        Some(&org.owner_token),
        Some(json!({"test_id": retest["test_id"]})),
    )
    .await
    .expect(200);

    // A real event is processed once.
    let (user, _) = app.member(&org, &org.member_role).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let processed = receiver.processed.lock().unwrap().clone();
        if let Some(event) = processed
            .iter()
            .find(|e| e["event"] == json!("member.added"))
        {
            assert_eq!(event["data"]["user_id"], json!(user));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the example never processed the event"
        );
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }

    // Forgeries: 401; a replayed delivery id: acknowledged, not processed again.
    let client = crate::helpers::client();
    let base = format!("http://127.0.0.1:{port}");
    let body =
        br#"{"event":"member.added","occurred_at":"2026-11-22T10:00:00.000Z","data":{}}"#.to_vec();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let forged = |signature: &str, timestamp: &str, id: &str| Req {
        method: Method::POST,
        path: "/hook".into(),
        token: None,
        body: Some(body.clone()),
        content_type: Some("application/json"),
        headers: vec![
            ("X-Service-Signature", signature.to_owned()),
            ("webhook-timestamp", timestamp.to_owned()),
            ("X-Service-Delivery", id.to_owned()),
        ],
    };
    let wrong = send(
        &client,
        &base,
        forged(&format!("sha256={}", "0".repeat(64)), &now, "d1"),
    )
    .await;
    assert_eq!(
        (wrong.status, wrong.body.as_slice()),
        (401, b"bad signature".as_slice())
    );
    let missing = send(&client, &base, forged("", &now, "d1")).await;
    assert_eq!(missing.status, 401);

    let valid = example_signature(&secret, &body);
    let stale = send(&client, &base, forged(&valid, "1000000000", "d2")).await;
    assert_eq!(stale.status, 401);
    let first = send(&client, &base, forged(&valid, &now, "d3")).await;
    assert_eq!(
        (first.status, first.body.as_slice()),
        (200, b"processed".as_slice())
    );
    let again = send(&client, &base, forged(&valid, &now, "d3")).await;
    assert_eq!(
        (again.status, again.body.as_slice()),
        (200, b"duplicate ignored".as_slice())
    );
}

/// `sha256=<hex>` computed here, independently of both rolecall and the example.
fn example_signature(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    format!(
        "sha256={}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}
