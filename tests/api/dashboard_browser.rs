//! The dashboard in a real browser (Debian's Chromium through chromedriver):
//! sign in, create a role from Member's permissions, invite with it, set up
//! the webhook against a real subscriber (Test, then Save), see a delivery in
//! the log, recover the failed ones, browse the event catalog (every
//! generated example validates against its schema), rotate the secret; and a
//! screenshot of every page at 1280 and
//! 390 px, written to `target/screenshots/`, or to `docs/screenshots/` (the
//! committed ones the README shows) with `ROLECALL_UPDATE_SCREENSHOTS=1`.
//!
//! Without Chromium the test is skipped with a printed reason, unless
//! `ROLECALL_REQUIRE_BROWSER=1` (CI), which makes that a failure.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::event_schemas::{catalog, check_envelope};
use crate::helpers::{eventually, spawn_app_with, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::{Behavior, TestReceiver};
use crate::webdriver::{missing_browser, ChromeDriver, Session};
use crate::webhook_delivery::verifies_with;

const ENTER: &str = "\u{E007}";
const ESCAPE: &str = "\u{E00C}";
const WIDTHS: [(u32, u32); 2] = [(1280, 900), (390, 844)];

/// Whether to run; prints why not, or panics when CI requires the browser.
pub fn browser_available() -> bool {
    let Some(reason) = missing_browser() else {
        return true;
    };
    if std::env::var("ROLECALL_REQUIRE_BROWSER").as_deref() == Ok("1") {
        panic!("ROLECALL_REQUIRE_BROWSER=1 but the browser test cannot run: {reason}");
    }
    println!("skipping dashboard browser test: {reason}");
    false
}

/// An organization made through the admin API, and its owner's session token.
struct Fixture {
    org_id: String,
    second_org_id: String,
    owner_token: String,
    member_role: String,
}

async fn fixture(app: &TestApp) -> Fixture {
    let owner = app.create_user("ada@acme.example").await;
    let owner_id = owner["id"].as_str().unwrap().to_owned();
    let owner_token = app
        .post(
            &format!("/admin/users/{owner_id}/tokens"),
            &app.admin,
            json!({"kind": "session", "name": "browser test"}),
        )
        .await
        .expect(201)
        .json()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut ids = Vec::new();
    for (name, plan) in [("Acme Robotics", "enterprise"), ("Beta Labs", "pro")] {
        let org = app
            .post(
                "/admin/organizations",
                &app.admin,
                json!({"name": name, "plan": plan, "owner_user_id": owner_id}),
            )
            .await
            .expect(201)
            .json();
        ids.push(org["id"].as_str().unwrap().to_owned());
    }
    let roles = app
        .get(&format!("/organizations/{}/roles", ids[0]), &owner_token)
        .await
        .expect(200)
        .json();
    Fixture {
        member_role: roles["items"][1]["id"].as_str().unwrap().to_owned(),
        org_id: ids.remove(0),
        second_org_id: ids.remove(0),
        owner_token,
    }
}

impl Fixture {
    fn path(&self, suffix: &str) -> String {
        format!("/organizations/{}{suffix}", self.org_id)
    }
}

/// Writes a full-page PNG of the current page at each width.
async fn capture(session: &Session, name: &str) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = if std::env::var_os("ROLECALL_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
        root.join("docs/screenshots")
    } else {
        root.join("target/screenshots")
    };
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    for (width, height) in WIDTHS {
        resize(session, width, height).await;
        let full = session
            .execute(
                "return Math.ceil(document.documentElement.scrollHeight);",
                vec![],
            )
            .await
            .as_u64()
            .unwrap_or(u64::from(height));
        let full = u32::try_from(full).unwrap_or(height).clamp(height, 6000);
        resize(session, width, full).await;
        // The chart redraws for its new width after a short debounce.
        actix_web::rt::time::sleep(Duration::from_millis(350)).await;
        let png = session.screenshot().await;
        std::fs::write(dir.join(format!("{name}-{width}.png")), png).expect("screenshot written");
    }
    resize(session, 1280, 900).await;
}

/// Sets the viewport (not the window) to `width` x `height` CSS pixels.
async fn resize(session: &Session, width: u32, height: u32) {
    session.set_window(width, height).await;
    let inner = session
        .execute("return [window.innerWidth, window.innerHeight];", vec![])
        .await;
    let got = |i: usize| u32::try_from(inner[i].as_u64().unwrap_or(0)).unwrap_or(0);
    let (dw, dh) = (width.saturating_sub(got(0)), height.saturating_sub(got(1)));
    if dw > 0 || dh > 0 {
        session.set_window(width + dw, height + dh).await;
    }
    let inner = session.execute("return window.innerWidth;", vec![]).await;
    assert_eq!(inner, json!(width), "viewport width");
}

async fn open_page(session: &Session, page: &str, heading: &str) {
    let link = session
        .wait_for(&format!("#nav a[data-page=\"{page}\"]"))
        .await;
    session.click(&link).await;
    session.wait_text("main h1", heading).await;
}

async fn click(session: &Session, css: &str) {
    let element = session.wait_for(css).await;
    session.click(&element).await;
}

async fn status(session: &Session, needle: &str) -> String {
    session.wait_text("#status", needle).await
}

#[actix_web::test]
async fn an_org_admin_manages_roles_members_and_the_webhook_in_a_browser() {
    if !browser_available() {
        return;
    }
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let fx = fixture(&app).await;
    app.create_user("bob@acme.example").await;
    let chromedriver = ChromeDriver::start().await;
    let session = chromedriver.session().await;
    resize(&session, 1280, 900).await;

    // Sign in with the keyboard: the token, then Enter.
    session.goto(&format!("{}/", app.address)).await;
    let token = session.wait_for("#token").await;
    capture(&session, "signin").await;
    session
        .send_keys(&token, &format!("{}{ENTER}", fx.owner_token))
        .await;
    session.wait_text("main h1", "Roles").await;
    let picker = session.text_of("#org-picker").await;
    assert!(
        picker.contains("Acme Robotics") && picker.contains("Beta Labs"),
        "the org picker lists both organizations: {picker:?}"
    );
    assert_eq!(
        session
            .execute("return sessionStorage.getItem('rolecall.token');", vec![])
            .await,
        json!(fx.owner_token),
        "the token is kept in sessionStorage"
    );

    let role_id = create_role_from_member(&session, &app, &fx).await;
    invite(&session, &app, &fx, &role_id).await;
    let secret = set_up_webhook(&session, &receiver).await;
    let bob = change_bobs_role_to_member(&session, &app, &fx).await;
    background_traffic(&app, &fx, &receiver).await;
    delivery_log(&session, &receiver).await;
    recover(&session, &receiver).await;
    event_catalog(&session).await;
    audit_log(&session).await;
    rotate(&session, &app, &fx, &receiver, &bob, &secret).await;
    read_only_on_pro(&session, &fx).await;

    // No script errors and no CSP violations; the only failed loads are the
    // API answers the flow provoked on purpose (404 no webhook yet, 422, 400).
    let errors: Vec<String> = session
        .console_errors()
        .await
        .into_iter()
        .filter(|m| !m.contains("Failed to load resource: the server responded with a status of"))
        .collect();
    assert!(errors.is_empty(), "browser console errors: {errors:#?}");

    session.quit().await;
    drop(chromedriver);
}

/// New role → copy from Member → one sensitive key more → Create.
async fn create_role_from_member(session: &Session, app: &TestApp, fx: &Fixture) -> String {
    click(session, "#new-role").await;
    let name = session.wait_for("#role-name").await;
    session.send_keys(&name, "Release manager").await;
    let description = session.wait_for("#role-description").await;
    session
        .send_keys(&description, "Ships releases; may delete projects.")
        .await;
    let copy_from = session.wait_for("#copy-from").await;
    assert_eq!(
        session.property(&copy_from, "value").await,
        json!(fx.member_role),
        "copy defaults to Member"
    );
    assert_eq!(
        session.text_of("#perm-summary").await,
        "0 of 52 permissions selected, 0 of them sensitive."
    );
    click(session, "#copy-permissions").await;
    status(session, "Copied 41 permissions from Member").await;
    assert_eq!(
        session.text_of("#perm-summary").await,
        "41 of 52 permissions selected, 2 of them sensitive."
    );
    click(session, "input[name=perm][value=\"org:projects:delete\"]").await;
    assert_eq!(
        session.text_of("#perm-summary").await,
        "42 of 52 permissions selected, 3 of them sensitive."
    );
    let label = session
        .text_of("fieldset[data-domain=projects] label:has(input[value=\"org:projects:delete\"])")
        .await;
    assert!(
        label.contains("Sensitive"),
        "sensitive keys are marked: {label:?}"
    );
    capture(session, "role-form").await;
    click(session, "#role-save").await;
    status(session, "Role \u{201c}Release manager\u{201d} created.").await;
    let row = "tr[data-role-name=\"Release manager\"]";
    session.wait_for(row).await;
    assert_eq!(session.text_of(&format!("{row} .members-count")).await, "0");
    capture(session, "roles").await;

    // Edit (PATCH with the role's ETag in If-Match).
    click(session, &format!("{row} a")).await;
    session.wait_text("main h1", "Edit role").await;
    let description = session.wait_for("#role-description").await;
    session.clear(&description).await;
    session
        .send_keys(&description, "Ships releases and may delete projects.")
        .await;
    click(session, "#role-save").await;
    status(session, "Role \u{201c}Release manager\u{201d} saved.").await;
    session
        .wait_text(row, "Ships releases and may delete projects.")
        .await;

    let roles = app
        .get(&fx.path("/roles"), &fx.owner_token)
        .await
        .expect(200)
        .json();
    let items = roles["items"].as_array().unwrap();
    let member = &items[1]["permissions"];
    let created = items
        .iter()
        .find(|r| r["name"] == json!("Release manager"))
        .expect("the role exists");
    let mut expected: Vec<Value> = member.as_array().unwrap().clone();
    expected.push(json!("org:projects:delete"));
    expected.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    assert_eq!(created["permissions"], json!(expected));
    assert_eq!(
        created["description"],
        json!("Ships releases and may delete projects.")
    );
    created["id"].as_str().unwrap().to_owned()
}

async fn invite(session: &Session, app: &TestApp, fx: &Fixture, role_id: &str) {
    open_page(session, "members", "Members").await;
    let email = session.wait_for("#invite-email").await;
    session.send_keys(&email, "bob@acme.example").await;
    click(
        session,
        &format!("#invite-role option[value=\"{role_id}\"]"),
    )
    .await;
    click(session, "#invite-submit").await;
    status(session, "bob@acme.example joined as Release manager.").await;
    let row = "tr[data-email=\"bob@acme.example\"]";
    session
        .wait_text(&format!("{row} .role-name"), "Now: Release manager")
        .await;

    // Release manager for three days, then Member: "Set an end".
    click(session, &format!("{row} details.expiry summary")).await;
    let bob_id = session
        .attribute(&session.wait_for(row).await, "data-user-id")
        .await
        .expect("row has the user id");
    session
        .execute(
            "const input = document.getElementById(arguments[0]); \
             const at = Date.now() + 3 * 864e5 - new Date().getTimezoneOffset() * 6e4; \
             input.value = new Date(at).toISOString().slice(0, 16);",
            vec![json!(format!("expires-for-{bob_id}"))],
        )
        .await;
    click(session, &format!("{row} .expiry-save")).await;
    status(session, "bob@acme.example holds Release manager until").await;
    session
        .wait_text(&format!("{row} .role-expiry"), "then Member")
        .await;
    let bob = app
        .get(&fx.path(&format!("/members/{bob_id}")), &fx.owner_token)
        .await
        .expect(200)
        .json();
    let ends = bob["role_expires_at"].as_str().expect("an end was set");
    let ends = rolecall::time::Timestamp::parse_rfc3339(ends).expect("RFC 3339");
    let ahead = ends.millis() - rolecall::time::Timestamp::now().millis();
    assert!(
        (2 * 86_400_000..=3 * 86_400_000).contains(&ahead),
        "three days ahead, to the minute: {ahead} ms"
    );
    capture(session, "members").await;

    // A role with members cannot be deleted: the 422 in words.
    open_page(session, "roles", "Roles").await;
    click(
        session,
        "tr[data-role-name=\"Release manager\"] button.btn-danger",
    )
    .await;
    session.wait_for("#confirm[open]").await;
    click(session, "#confirm-ok").await;
    let refused = status(
        session,
        "This role still has 1 member; move them to another role first.",
    )
    .await;
    assert!(
        refused.contains("ROLE_IN_USE"),
        "the server's detail and code are shown: {refused:?}"
    );

    let members = app
        .get(&fx.path("/members"), &fx.owner_token)
        .await
        .expect(200)
        .json();
    let bob = members["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["email"] == json!("bob@acme.example"))
        .expect("bob is a member")
        .clone();
    assert_eq!(bob["role_id"], json!(role_id));
}

/// URL and events, Test (Save locked before), read the secret once, Save.
async fn set_up_webhook(session: &Session, receiver: &TestReceiver) -> String {
    open_page(session, "webhook", "Webhook").await;
    session
        .wait_text("#webhook-none", "No endpoint is configured")
        .await;
    session.wait_enabled("#webhook-save", false).await;
    let url = session.wait_for("#webhook-url").await;
    session.send_keys(&url, &receiver.url).await;
    click(session, "input[name=event][value=\"member.added\"]").await;
    click(session, "input[name=event][value=\"member.role_changed\"]").await;
    assert!(
        !session
            .enabled(&session.wait_for("#webhook-save").await)
            .await,
        "Save is locked before a passing Test"
    );
    click(session, "#webhook-test").await;
    session
        .wait_for("#webhook-result[data-passed=\"true\"]")
        .await;
    assert_eq!(session.text_of("#result-status").await, "200");
    assert!(session.text_of("#result-latency").await.ends_with(" ms"));
    assert_eq!(session.text_of("#result-body").await, "answer 200");
    status(session, "Test passed: the endpoint answered 200").await;
    session.wait_enabled("#webhook-save", true).await;

    let secret = session.text_of("#secret-value").await;
    assert!(
        secret.starts_with("whsec_"),
        "the secret is shown: {secret:?}"
    );
    assert_eq!(
        session.text_of("#secret-warning").await,
        "You will not see this again. Copy it now and keep it with your subscriber."
    );
    click(session, "#secret-copy").await;
    let copied = status(session, "ecret").await;
    assert!(
        copied.contains("Secret copied") || copied.contains("The secret is selected"),
        "{copied:?}"
    );
    // The preflight the subscriber got is signed with the secret on screen.
    let preflight = receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(preflight[0].header("x-service-event"), "test.preflight");
    assert_eq!(verifies_with(&preflight[0], &secret), (true, true));

    click(session, "#webhook-save").await;
    status(session, "Webhook saved.").await;
    assert_eq!(session.text_of("#webhook-current-url").await, receiver.url);
    let last4 = &secret[secret.len() - 4..];
    session.wait_text("#secret-last4", last4).await;
    session.wait_enabled("#webhook-save", false).await;
    capture(session, "webhook").await;
    secret
}

/// The dashboard action that fires the event: bob goes back to Member.
async fn change_bobs_role_to_member(session: &Session, app: &TestApp, fx: &Fixture) -> String {
    open_page(session, "members", "Members").await;
    // The last Owner cannot demote herself: MUST_HAVE_OWNER in words.
    let own = "tr[data-email=\"ada@acme.example\"]";
    click(
        session,
        &format!("{own} select option[value=\"{}\"]", fx.member_role),
    )
    .await;
    click(session, &format!("{own} .cell-select button")).await;
    status(session, "An organization must keep at least one Owner.").await;

    let row = "tr[data-email=\"bob@acme.example\"]";
    let user_id = session
        .attribute(&session.wait_for(row).await, "data-user-id")
        .await
        .expect("row has the user id");
    click(
        session,
        &format!("{row} select option[value=\"{}\"]", fx.member_role),
    )
    .await;
    click(session, &format!("{row} .cell-select button")).await;
    status(session, "bob@acme.example is now Member.").await;
    session
        .wait_text(&format!("{row} .role-name"), "Now: Member")
        .await;
    let member = app
        .get(&fx.path(&format!("/members/{user_id}")), &fx.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(member["role_id"], json!(fx.member_role));
    assert_eq!(
        member["role_expires_at"],
        Value::Null,
        "a new role runs until changed"
    );
    user_id
}

/// More log records for the chart: one skipped, one failed twice.
async fn background_traffic(app: &TestApp, fx: &Fixture, receiver: &TestReceiver) {
    receiver.wait_for(2, Duration::from_secs(5)).await;
    app.post(
        &fx.path("/tasks"),
        &fx.owner_token,
        json!({"title": "Cut the release"}),
    )
    .await
    .expect(201);
    receiver.set(Behavior::status(503));
    app.create_user("carol@acme.example").await;
    app.post(
        &fx.path("/members"),
        &fx.owner_token,
        json!({"email": "carol@acme.example", "role_id": fx.member_role}),
    )
    .await
    .expect(201);
    receiver.wait_for(4, Duration::from_secs(5)).await;
    let owner = fx.owner_token.clone();
    let path = fx.path("/webhook/deliveries?limit=200");
    eventually(Duration::from_secs(5), "five log records", || {
        let (owner, path) = (owner.clone(), path.clone());
        async move {
            let reply = app.get(&path, &owner).await.expect(200).json();
            (reply["items"].as_array().map_or(0, Vec::len) == 5).then_some(())
        }
    })
    .await;
    receiver.set(Behavior::ok());
}

/// The UI-triggered delivery is in the table and the chart; filters; body; redeliver.
async fn delivery_log(session: &Session, receiver: &TestReceiver) {
    open_page(session, "deliveries", "Delivery log").await;
    let row = "#delivery-table tr[data-event=\"member.role_changed\"][data-outcome=\"succeeded\"]";
    session.wait_for(row).await;
    session
        .wait_text(
            "#chart-summary",
            "Last hour: 2 succeeded, 2 failed, 1 skipped.",
        )
        .await;
    assert!(
        !session
            .find_all("#delivery-chart-svg rect.bar-failed")
            .await
            .is_empty(),
        "failed attempts are drawn"
    );
    assert_eq!(session.find_all("#delivery-table tbody tr").await.len(), 5);
    click(session, &format!("{row} details summary")).await;
    session
        .wait_text(&format!("{row} details pre"), "answer 200")
        .await;
    let failed = session
        .text_of("#delivery-table tr[data-outcome=\"failed\"]")
        .await;
    assert!(failed.contains("the endpoint answered 503"), "{failed:?}");
    capture(session, "deliveries").await;

    // Filters: outcome, then event.
    click(session, "#filter-outcome option[value=\"failed\"]").await;
    click(session, "#filters-apply").await;
    eventually(Duration::from_secs(5), "only failed rows", || async move {
        let rows = session.find_all("#delivery-table tbody tr").await;
        let failed = session
            .find_all("#delivery-table tbody tr[data-outcome=\"failed\"]")
            .await;
        (rows.len() == 2 && failed.len() == 2).then_some(())
    })
    .await;
    click(session, "#filter-outcome option[value=\"\"]").await;
    click(
        session,
        "#filter-event option[value=\"member.role_changed\"]",
    )
    .await;
    click(session, "#filters-apply").await;
    eventually(
        Duration::from_secs(5),
        "only member.role_changed",
        || async move {
            let rows = session.find_all("#delivery-table tbody tr").await;
            (rows.len() == 1 && session.find(row).await.is_some()).then_some(())
        },
    )
    .await;

    // Redeliver: a new delivery of the same envelope reaches the subscriber.
    let before = receiver.received().len();
    click(session, &format!("{row} button")).await;
    status(session, "Redelivery of member.role_changed queued").await;
    let received = receiver.wait_for(before + 1, Duration::from_secs(5)).await;
    assert_eq!(
        received[before].header("x-service-event"),
        "member.role_changed"
    );
    eventually(
        Duration::from_secs(5),
        "the redelivery in the log",
        || async move {
            click(session, "#deliveries-refresh").await;
            let rows = session.find_all(row).await;
            (rows.len() == 2).then_some(())
        },
    )
    .await;
    click(session, "#filter-event option[value=\"\"]").await;
    click(session, "#filters-apply").await;
}

/// "Recover failed since…": carol's member.added failed twice; it is sent
/// once more, and a second recovery finds nothing left to send.
async fn recover(session: &Session, receiver: &TestReceiver) {
    open_page(session, "deliveries", "Delivery log").await;
    let since = session.wait_for("#recover-since").await;
    let value = session.property(&since, "value").await;
    assert!(
        value.as_str().is_some_and(|v| v.len() == 16),
        "the form starts an hour ago: {value}"
    );
    let failed: Vec<String> = receiver
        .received()
        .iter()
        .filter(|r| r.header("x-service-event") == "member.added")
        .map(|r| r.header("x-service-delivery"))
        .collect();
    assert_eq!(failed.len(), 2, "carol's two failed attempts");
    let before = receiver.received().len();
    click(session, "#recover-submit").await;
    let done = session
        .wait_text("#recover-result", "Recovered 1 failed delivery since")
        .await;
    assert!(done.contains("queued as a new delivery"), "{done:?}");
    status(session, "Recovered 1 failed delivery").await;
    let received = receiver.wait_for(before + 1, Duration::from_secs(5)).await;
    let resent = &received[before];
    assert_eq!(resent.header("x-service-event"), "member.added");
    assert_eq!(resent.json()["data"]["email"], json!("carol@acme.example"));
    assert_ne!(resent.header("x-service-delivery"), failed[0]);
    capture(session, "deliveries-recovered").await;

    // The event is delivered now: nothing is sent twice.
    eventually(
        Duration::from_secs(5),
        "the recovered delivery in the log",
        || async move {
            click(session, "#deliveries-refresh").await;
            let rows = session
                .find_all(
                    "#delivery-table tr[data-event=\"member.added\"][data-outcome=\"succeeded\"]",
                )
                .await;
            (rows.len() == 1).then_some(())
        },
    )
    .await;
    click(session, "#recover-submit").await;
    session
        .wait_text("#recover-result", "Nothing to recover")
        .await;
    assert_eq!(
        session
            .attribute(&session.wait_for("#recover-result").await, "data-count")
            .await,
        Some("0".to_owned())
    );
    actix_web::rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), before + 1);
}

/// Every event type of the catalog, with an example that validates against
/// the schema shown, which is the published one.
async fn event_catalog(session: &Session) {
    open_page(session, "events", "Events").await;
    let entries = catalog();
    assert_eq!(session.find_all("#event-type-list a").await.len(), 23);
    assert_eq!(entries.len(), 23);
    for entry in entries {
        click(
            session,
            &format!("#event-type-list a[data-event-type=\"{}\"]", entry.id),
        )
        .await;
        session
            .wait_for(&format!("#event-viewer[data-event-type=\"{}\"]", entry.id))
            .await;
        assert_eq!(
            session.text_of("#event-description").await,
            entry.description.replace('`', "")
        );
        let shown = |id: &str| {
            let script = format!("return document.getElementById('{id}').textContent;");
            async move { session.execute(&script, vec![]).await }
        };
        let example = shown("event-example").await;
        let example = example.as_str().unwrap_or_default();
        let problems = check_envelope(example.as_bytes());
        assert!(
            problems.is_empty(),
            "{}: the example {example} is invalid: {problems:?}",
            entry.id
        );
        let schema = shown("event-schema").await;
        let schema: Value = serde_json::from_str(schema.as_str().unwrap_or_default())
            .expect("the schema shown is JSON");
        assert_eq!(schema, entry.schema, "{}", entry.id);
    }
    click(
        session,
        "#event-type-list a[data-event-type=\"pr.violation_detected\"]",
    )
    .await;
    session
        .wait_for("#event-viewer[data-event-type=\"pr.violation_detected\"]")
        .await;
    capture(session, "events").await;
}

async fn audit_log(session: &Session) {
    open_page(session, "audit", "Audit log").await;
    // The filter lists the actions the OpenAPI document publishes.
    session
        .wait_for("#filter-action option[value=\"webhook.recovered\"]")
        .await;
    assert_eq!(session.find_all("#filter-action option").await.len(), 17);
    // Two recoveries, newest first: the one that found nothing, then carol's.
    let recovered = session
        .execute(
            "return [...document.querySelectorAll('#audit-table tr[data-action=\"webhook.recovered\"]')].map((r) => r.textContent);",
            vec![],
        )
        .await;
    let recovered: Vec<&str> = recovered
        .as_array()
        .map(|rows| rows.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(recovered.len(), 2, "{recovered:?}");
    assert!(recovered[0].contains("\"count\": 0"), "{recovered:?}");
    assert!(recovered[1].contains("\"count\": 1"), "{recovered:?}");
    for action in [
        "role.created",
        "member.added",
        "member.role_changed",
        "webhook.saved",
        "webhook.recovered",
    ] {
        session
            .wait_for(&format!("#audit-table tr[data-action=\"{action}\"]"))
            .await;
    }
    let created = session
        .text_of("#audit-table tr[data-action=\"role.created\"]")
        .await;
    assert!(
        created.contains("ada@acme.example") && created.contains("Release manager"),
        "{created:?}"
    );
    capture(session, "audit").await;
}

/// Rotate: Escape cancels; confirming shows a new secret once; gone after a reload.
async fn rotate(
    session: &Session,
    app: &TestApp,
    fx: &Fixture,
    receiver: &TestReceiver,
    bob: &str,
    first: &str,
) {
    open_page(session, "webhook", "Webhook").await;
    click(session, "#webhook-rotate").await;
    session.wait_for("#confirm[open]").await;
    let cancel = session.wait_for("#confirm-cancel").await;
    session.send_keys(&cancel, ESCAPE).await;
    session.wait_gone("#confirm[open]").await;
    assert!(
        session.find("#secret-value").await.is_none(),
        "Escape cancels"
    );

    click(session, "#webhook-rotate").await;
    session.wait_for("#confirm[open]").await;
    click(session, "#confirm-ok").await;
    status(session, "Secret rotated.").await;
    let secret = session.text_of("#secret-value").await;
    assert!(
        secret.starts_with("whsec_") && secret != first,
        "{secret:?}"
    );
    session
        .wait_text("#secret-last4", &secret[secret.len() - 4..])
        .await;

    // Deliveries from now on are signed with the secret shown.
    let before = receiver.received().len();
    let owner_role = app
        .get(&fx.path("/roles"), &fx.owner_token)
        .await
        .expect(200)
        .json()["items"][0]["id"]
        .clone();
    app.patch(
        &fx.path(&format!("/members/{bob}")),
        &fx.owner_token,
        json!({"role_id": owner_role}),
    )
    .await
    .expect(200);
    let received = receiver.wait_for(before + 1, Duration::from_secs(5)).await;
    assert_eq!(verifies_with(&received[before], &secret), (true, true));
    assert_eq!(verifies_with(&received[before], first), (false, false));

    session.refresh().await;
    session.wait_text("main h1", "Webhook").await;
    session.wait_for("#secret-last4").await;
    assert!(session.find("#secret-value").await.is_none());
    let page = session
        .execute(
            "return document.documentElement.outerHTML + JSON.stringify(sessionStorage);",
            vec![],
        )
        .await;
    let page = page.as_str().unwrap_or_default();
    assert!(
        !page.contains(&secret) && !page.contains(first),
        "no secret after a reload"
    );
}

/// On Pro, roles are read-only with the reason shown.
async fn read_only_on_pro(session: &Session, fx: &Fixture) {
    open_page(session, "roles", "Roles").await;
    click(
        session,
        &format!("#org-picker option[value=\"{}\"]", fx.second_org_id),
    )
    .await;
    session
        .wait_text("#roles-lock", "This organization is on the Pro plan")
        .await;
    session.wait_enabled("#new-role", false).await;
    capture(session, "roles-pro").await;
    click(session, "tr[data-role-name=\"Member\"] a").await;
    session
        .wait_text(
            "#role-lock",
            "Roles can be created, edited and deleted only on Enterprise",
        )
        .await;
    assert!(session.find("#role-save").await.is_none());
    assert!(!session.enabled(&session.wait_for("#role-name").await).await);
}

/// Issue 32: the webhook page of an organization whose endpoint answered
/// 410 shows it disabled, why and since when, and how to enable it again.
#[actix_web::test]
async fn a_disabled_endpoint_shows_a_banner_on_the_webhook_page() {
    use crate::receiver::Behavior;

    if !browser_available() {
        return;
    }
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let fx = fixture(&app).await;
    let org = format!("/organizations/{}", fx.org_id);
    let tested = app
        .post(
            &format!("{org}/webhook/test"),
            &fx.owner_token,
            json!({"url": receiver.url, "events": ["task.created"]}),
        )
        .await
        .expect(200)
        .json();
    app.call(
        actix_web::http::Method::PUT,
        &format!("{org}/webhook"),
        Some(&fx.owner_token),
        Some(json!({"test_id": tested["test_id"]})),
    )
    .await
    .expect(200);
    receiver.script(vec![Behavior::status(410)]);
    app.post(
        &format!("{org}/tasks"),
        &fx.owner_token,
        json!({"title": "gone"}),
    )
    .await
    .expect(201);
    eventually(Duration::from_secs(10), "the endpoint disabled", || async {
        let view = app
            .get(&format!("{org}/webhook"), &fx.owner_token)
            .await
            .expect(200)
            .json();
        (view["status"] == json!("disabled")).then_some(())
    })
    .await;

    let chromedriver = ChromeDriver::start().await;
    let session = chromedriver.session().await;
    resize(&session, 1280, 900).await;
    session.goto(&format!("{}/", app.address)).await;
    let token = session.wait_for("#token").await;
    session
        .send_keys(&token, &format!("{}{ENTER}", fx.owner_token))
        .await;
    session.wait_text("main h1", "Roles").await;
    open_page(&session, "webhook", "Webhook").await;
    let banner = session.wait_text("#webhook-disabled", "410 Gone").await;
    assert!(
        banner.contains("Nothing is sent to it")
            && banner.contains("Test the endpoint, then save it"),
        "{banner}"
    );
    let head = session.text_of("#webhook-current .card-head").await;
    assert!(
        head.contains("Disabled") && !head.contains("Active"),
        "{head}"
    );
    capture(&session, "webhook-disabled").await;
    session.quit().await;
    drop(chromedriver);
}
