//! A slow or dead endpoint delays only its own organization's deliveries
//! (CONTRACT §6): no global queue is blocked by it.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{spawn_app_with, Org, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::{Behavior, TestReceiver};

/// How long org A's endpoint takes to answer every request.
const HANG: Duration = Duration::from_secs(4);

/// Changes `user`'s role `n` times, alternating between `role` and Member:
/// `n` `member.role_changed` events, in order.
async fn toggle(app: &TestApp, org: &Org, user: &str, role: &str, n: usize) {
    for i in 0..n {
        let role_id = if i % 2 == 0 { role } else { &org.member_role };
        app.patch(
            &org.path(&format!("/members/{user}")),
            &org.owner_token,
            json!({"role_id": role_id}),
        )
        .await
        .expect(200);
    }
}

/// An enterprise org with a custom role and a member (added before any
/// endpoint exists, so without an event): (org, role id, member id).
async fn org_with_member(app: &TestApp) -> (Org, String, String) {
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Ops", &["org:team:read"]).await;
    let (user, _) = app.member(&org, &org.member_role).await;
    (org, role, user)
}

#[actix_web::test]
async fn a_hanging_endpoint_delays_only_its_own_organization() {
    let mut overrides = WEBHOOK_TEST_CONFIG.to_vec();
    overrides.extend_from_slice(&[
        // A's attempts stay pending (not timed out) for the whole race.
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "6000"),
        ("ROLECALL_WEBHOOKS__MAX_IN_FLIGHT_PER_ORG", "4"),
    ]);
    let app = spawn_app_with(&overrides).await;
    let receiver_a = TestReceiver::start().await;
    let receiver_b = TestReceiver::start().await;
    let (a, role_a, user_a) = org_with_member(&app).await;
    let (b, role_b, user_b) = org_with_member(&app).await;
    app.setup_webhook(&a, &receiver_a.url, &["member.role_changed"])
        .await;
    app.setup_webhook(&b, &receiver_b.url, &["member.role_changed"])
        .await;
    receiver_a.set(Behavior::slow(HANG));

    // A first: more events than its 4 slots; its endpoint hangs on each.
    toggle(&app, &a, &user_a, &role_a, 6).await;
    let a_received = receiver_a.wait_for(1 + 4, Duration::from_secs(5)).await;
    let a_first_receipt = a_received[1].at;

    // Then 200 events for B, whose endpoint is healthy.
    toggle(&app, &b, &user_b, &role_b, 200).await;
    let b_received = receiver_b.wait_for(1 + 200, Duration::from_secs(10)).await;
    let b_last_receipt = b_received.iter().map(|r| r.at).max().unwrap();

    // Order of completion: B's 200 all arrived before A's endpoint could have
    // answered even its first delivery, and A has no finished attempt yet.
    let a_log = app.deliveries(&a, "&event=member.role_changed").await;
    assert!(
        a_log.is_empty(),
        "B's 200 deliveries must not wait for A's: A already finished {a_log:?}"
    );
    assert!(
        b_last_receipt < a_first_receipt + HANG,
        "B's last delivery arrived {:?} after A's first attempt started, but A's endpoint answers only after {HANG:?}",
        b_last_receipt.duration_since(a_first_receipt)
    );
    assert_eq!(
        receiver_a.received().len(),
        1 + 4,
        "A has at most max_in_flight_per_org = 4 attempts in flight"
    );

    // B got each of its 200 events once, on the first attempt.
    let deliveries: HashSet<String> = b_received[1..]
        .iter()
        .map(|r| r.header("x-service-delivery"))
        .collect();
    assert_eq!(deliveries.len(), 200);
    for r in &b_received[1..] {
        assert_eq!(r.header("x-service-event"), "member.role_changed");
        assert_eq!(r.header("x-service-attempt"), "1");
    }
    assert_eq!(receiver_b.received().len(), 201, "no retries for B");

    // A was only slow: its first attempts finish, then its queue moves on.
    let a_all = receiver_a
        .wait_for(1 + 6, HANG + Duration::from_secs(4))
        .await;
    assert!(
        a_all[5].at >= a_first_receipt + HANG - Duration::from_millis(50),
        "A's 5th delivery waited for a free slot"
    );
}

/// More hanging attempts than an HTTP client pools by default (100) must
/// neither be held back by the client nor hold back another organization's
/// deliveries: the dispatcher's in-flight limits are the only limits.
#[actix_web::test]
async fn many_hanging_attempts_do_not_exhaust_a_shared_connection_pool() {
    let mut overrides = WEBHOOK_TEST_CONFIG.to_vec();
    overrides.extend_from_slice(&[
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "6000"),
        ("ROLECALL_WEBHOOKS__MAX_IN_FLIGHT_PER_ORG", "120"),
        // One delivery thread: one client, one pool, for both orgs.
        ("ROLECALL_WEBHOOKS__DELIVERY_WORKERS", "1"),
    ]);
    let app = spawn_app_with(&overrides).await;
    let receiver_a = TestReceiver::start().await;
    let receiver_b = TestReceiver::start().await;
    let (a, role_a, user_a) = org_with_member(&app).await;
    let (b, role_b, user_b) = org_with_member(&app).await;
    app.setup_webhook(&a, &receiver_a.url, &["member.role_changed"])
        .await;
    app.setup_webhook(&b, &receiver_b.url, &["member.role_changed"])
        .await;
    receiver_a.set(Behavior::slow(HANG));

    // All 120 of A's attempts are in flight at once, each hanging for HANG.
    toggle(&app, &a, &user_a, &role_a, 120).await;
    let a_received = receiver_a.wait_for(1 + 120, Duration::from_secs(3)).await;
    let a_first_receipt = a_received[1].at;

    // B's deliveries do not wait for a connection A holds.
    toggle(&app, &b, &user_b, &role_b, 5).await;
    let b_received = receiver_b.wait_for(1 + 5, Duration::from_secs(3)).await;
    let b_last_receipt = b_received.iter().map(|r| r.at).max().unwrap();
    assert!(
        b_last_receipt < a_first_receipt + HANG,
        "B's last delivery arrived {:?} after A's first attempt started; A's endpoint holds its connections for {HANG:?}",
        b_last_receipt.duration_since(a_first_receipt)
    );
}
