//! Role assignments that expire (issue 18): from the instant an assignment
//! ends, the member is judged on Member's keys, before anything is recorded;
//! the fall-back is then recorded as one change (audit `member.role_expired`,
//! event `member.role_changed`), also for assignments that ended while the
//! service was down; Owner cannot expire; `null` clears an expiry.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{
    eventually, spawn_app_with, Org, Running, TestApp, ADMIN, WEBHOOK_TEST_CONFIG,
};
use crate::receiver::TestReceiver;

/// No sweep during the test: only the one at start, when nothing is due.
const NO_SWEEP: &[(&str, &str)] = &[("ROLECALL_ACTORS__ROLE_EXPIRY_SWEEP_MS", "3600000")];

/// An RFC 3339 instant `ms` from now.
fn in_ms(ms: i64) -> String {
    rolecall::time::Timestamp(rolecall::time::Timestamp::now().millis() + ms).to_rfc3339()
}

/// Waits until the instant `at` (RFC 3339) has passed by a little.
async fn pass(at: &str) {
    let at = rolecall::time::Timestamp::parse_rfc3339(at).expect("an instant");
    let left = at.millis() - rolecall::time::Timestamp::now().millis();
    let wait = u64::try_from(left.max(0)).unwrap_or(0) + 150;
    actix_web::rt::time::sleep(Duration::from_millis(wait)).await;
}

/// A custom role holding one key Member lacks: `org:projects:delete`.
async fn deployer(app: &TestApp, org: &Org) -> String {
    app.role(
        org,
        "Deployer",
        &[
            "org:projects:read",
            "org:projects:create",
            "org:projects:delete",
        ],
    )
    .await
}

/// Invites a new user with `role` until `until`: (user id, token, the member).
async fn invite_until(
    app: &TestApp,
    org: &Org,
    role: &str,
    until: &str,
) -> (String, String, Value) {
    let tag = rolecall::ids::new_v7().simple().to_string();
    let (id, token) = app.user(&format!("temp-{tag}@example.test")).await;
    let member = app
        .post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": id, "role_id": role, "role_expires_at": until}),
        )
        .await
        .expect(201)
        .json();
    (id, token, member)
}

async fn project(app: &TestApp, org: &Org) -> String {
    app.post(
        &org.path("/projects"),
        &org.owner_token,
        json!({"name": "Temp"}),
    )
    .await
    .expect(201)
    .json()["id"]
        .as_str()
        .expect("project id")
        .to_owned()
}

on_both_engines! {
    async fn an_expired_role_is_member_on_the_next_request_before_anything_is_recorded() {
        let app = spawn_app_with(NO_SWEEP).await;
        let org = app.org("enterprise").await;
        let role = deployer(&app, &org).await;
        let until = in_ms(3000);
        let (user, token, member) = invite_until(&app, &org, &role, &until).await;
        assert_eq!(member["role_id"], json!(role));
        assert_eq!(member["role_name"], json!("Deployer"));
        let expires = member["role_expires_at"].as_str().expect("an expiry").to_owned();
        assert_eq!(
            rolecall::time::Timestamp::parse_rfc3339(&expires),
            rolecall::time::Timestamp::parse_client(&until)
        );

        // While it runs: Deployer's keys, on the real route too.
        let mine = app.get(&org.path("/permissions/mine"), &token).await.expect(200).json();
        assert_eq!(mine["role_name"], json!("Deployer"));
        assert_eq!(mine["role_expires_at"], json!(expires));
        let first = project(&app, &org).await;
        app.delete(&org.path(&format!("/projects/{first}")), &token).await.expect(204);

        pass(&until).await;
        // The very next request: Member's keys, though no sweep has run.
        let second = project(&app, &org).await;
        let refused = app
            .delete(&org.path(&format!("/projects/{second}")), &token)
            .await
            .problem(403, "FORBIDDEN");
        assert_eq!(refused["missing_permission"], json!("org:projects:delete"));
        let check = app
            .post(&org.path("/permissions/check"), &token, json!({"permissions": ["org:projects:delete", "org:tasks:create"]}))
            .await
            .expect(200)
            .json();
        assert_eq!(check, json!({"results": {"org:projects:delete": false, "org:tasks:create": true}}));
        let shown = app
            .get(&org.path(&format!("/members/{user}")), &org.owner_token)
            .await
            .expect(200)
            .json();
        assert_eq!(shown["role_id"], json!(org.member_role));
        assert_eq!(shown["role_name"], json!("Member"));
        assert_eq!(shown["role_expires_at"], Value::Null);
        let mine = app.get(&org.path("/permissions/mine"), &token).await.expect(200).json();
        assert_eq!(mine["role_name"], json!("Member"));
        assert_eq!(mine["permissions"].as_array().map(Vec::len), Some(41));
        // Nothing recorded yet: that is the sweep's job.
        assert!(app.audit(&org).await.iter().all(|r| r["action"] != json!("member.role_expired")));
    }

    async fn the_fall_back_is_recorded_with_an_audit_record_and_an_event() {
        let mut config = WEBHOOK_TEST_CONFIG.to_vec();
        config.push(("ROLECALL_ACTORS__ROLE_EXPIRY_SWEEP_MS", "100"));
        let app = spawn_app_with(&config).await;
        let receiver = TestReceiver::start().await;
        let org = app.org("enterprise").await;
        app.setup_webhook(&org, &receiver.url, &["member.role_changed"]).await;
        let role = deployer(&app, &org).await;
        let until = in_ms(1000);
        let (user, _, before) = invite_until(&app, &org, &role, &until).await;

        let records = eventually(Duration::from_secs(10), "member.role_expired", || {
            let (app, org) = (&app, &org);
            async move {
                let audit = app.audit(org).await;
                audit.iter().any(|r| r["action"] == json!("member.role_expired")).then_some(audit)
            }
        })
        .await;
        let expired: Vec<&Value> = records.iter().filter(|r| r["action"] == json!("member.role_expired")).collect();
        assert_eq!(expired.len(), 1, "one record: {expired:?}");
        let record = expired[0];
        assert_eq!(record["actor_user_id"], Value::Null);
        assert_eq!(record["target_type"], json!("member"));
        assert_eq!(record["target_id"], json!(user));
        assert_eq!(record["before"], before);
        assert_eq!(record["after"]["role_id"], json!(org.member_role));
        assert_eq!(record["after"]["role_name"], json!("Member"));
        assert_eq!(record["after"]["role_expires_at"], Value::Null);
        assert_eq!(record["after"]["updated_at"], before["role_expires_at"]);

        // The preflight of the set-up, then the fall-back's event.
        let received = receiver.wait_for(2, Duration::from_secs(10)).await;
        let event = received[1].json();
        assert_eq!(event["event"], json!("member.role_changed"));
        assert_eq!(event["occurred_at"], before["role_expires_at"]);
        assert_eq!(event["data"], record["after"]);
        // Stored as the fall-back, and recorded once however many sweeps run.
        actix_web::rt::time::sleep(Duration::from_millis(400)).await;
        let member = app.get(&org.path(&format!("/members/{user}")), &org.owner_token).await.expect(200).json();
        assert_eq!(member, record["after"]);
        let audit = app.audit(&org).await;
        assert_eq!(audit.iter().filter(|r| r["action"] == json!("member.role_expired")).count(), 1);
        assert_eq!(receiver.received().len(), 2);
    }

    async fn an_assignment_that_ended_while_the_service_was_down_has_fallen_back_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = [("ROLECALL_ACTORS__ROLE_EXPIRY_SWEEP_MS", "3600000")];
        let mut server = Running::start(dir.path(), &env);
        let (org, owner) = server.org(ADMIN, "Downtime").await;
        server
            .patch(&format!("/admin/organizations/{org}"), ADMIN, json!({"plan": "enterprise"}))
            .await
            .expect(200);
        let role = server
            .post(&format!("/organizations/{org}/roles"), &owner, json!({"name": "Deployer", "permissions": ["org:projects:delete"]}))
            .await
            .expect(201)
            .json()["id"]
            .clone();
        let (user, _) = server.user(ADMIN, "temp@downtime.test").await;
        let until = in_ms(1500);
        server
            .post(&format!("/organizations/{org}/members"), &owner, json!({"user_id": user, "role_id": role, "role_expires_at": until}))
            .await
            .expect(201);
        server.stop_gracefully().await;
        pass(&until).await;

        // The sweep at start records it; the next would come in an hour.
        let server = Running::start(dir.path(), &env);
        let path = format!("/organizations/{org}/audit-log?action=member.role_expired");
        let record = eventually(Duration::from_secs(10), "the fall-back recorded at start", || {
            let (server, path, owner) = (&server, &path, &owner);
            async move {
                let page = server.get(path, owner).await.expect(200).json();
                page["items"].as_array().and_then(|items| items.first().cloned())
            }
        })
        .await;
        assert_eq!(record["target_id"], json!(user));
        assert_eq!(record["after"]["role_name"], json!("Member"));
        let member = server
            .get(&format!("/organizations/{org}/members/{user}"), &owner)
            .await
            .expect(200)
            .json();
        assert_eq!(member["role_name"], json!("Member"));
        assert_eq!(member["role_expires_at"], Value::Null);
    }

    async fn owner_cannot_expire_null_clears_and_bad_instants_are_refused() {
        let app = spawn_app_with(NO_SWEEP).await;
        let org = app.org("enterprise").await;
        let role = deployer(&app, &org).await;
        let (other, _) = app.user("invitee@example.test").await;
        let members = org.path("/members");

        // Owner: never, whether invited, patched, or both at once.
        let problem = app
            .post(&members, &org.owner_token, json!({"user_id": other, "role_id": org.owner_role, "role_expires_at": in_ms(60_000)}))
            .await
            .problem(400, "VALIDATION_FAILED");
        assert_eq!(problem["field"], json!("role_expires_at"));
        let owner_path = org.path(&format!("/members/{}", org.owner_id));
        let problem = app
            .patch(&owner_path, &org.owner_token, json!({"role_expires_at": in_ms(60_000)}))
            .await
            .problem(400, "VALIDATION_FAILED");
        assert_eq!(problem["field"], json!("role_expires_at"));

        // Bad instants and bodies, on an invite and on a member: 400, nothing changes.
        for (until, why) in [
            (json!(in_ms(-1000)), "in the past"),
            (json!(in_ms(366 * 24 * 3600 * 1000)), "over a year ahead"),
            (json!("tomorrow"), "not RFC 3339"),
            (json!(12), "not a string"),
        ] {
            let problem = app
                .post(&members, &org.owner_token, json!({"user_id": other, "role_id": role, "role_expires_at": until}))
                .await
                .problem(400, "VALIDATION_FAILED");
            assert_eq!(problem["field"], json!("role_expires_at"), "{why}");
        }
        let (user, _, member) = invite_until(&app, &org, &role, &in_ms(3_600_000)).await;
        let path = org.path(&format!("/members/{user}"));
        for body in [json!({}), json!({"role_id": null}), json!({"role_expires_at": in_ms(-5)})] {
            app.patch(&path, &org.owner_token, body.clone()).await.problem(400, "VALIDATION_FAILED");
        }
        app.patch(&path, &org.owner_token, json!({"role_id": org.owner_role, "role_expires_at": in_ms(60_000)}))
            .await
            .problem(400, "VALIDATION_FAILED");
        let unchanged = app.get(&path, &org.owner_token).await.expect(200).json();
        assert_eq!(unchanged, member);

        // A new end on the same role, then null: both recorded, neither an event's business.
        let later = in_ms(7_200_000);
        let moved = app.patch(&path, &org.owner_token, json!({"role_expires_at": later})).await.expect(200).json();
        assert_eq!(moved["role_id"], json!(role));
        assert_eq!(
            rolecall::time::Timestamp::parse_rfc3339(moved["role_expires_at"].as_str().unwrap_or("")),
            rolecall::time::Timestamp::parse_client(&later)
        );
        let cleared = app.patch(&path, &org.owner_token, json!({"role_expires_at": null})).await.expect(200).json();
        assert_eq!(cleared["role_id"], json!(role));
        assert_eq!(cleared["role_expires_at"], Value::Null);
        let again = app.patch(&path, &org.owner_token, json!({"role_expires_at": null})).await.expect(200).json();
        assert_eq!(again, cleared, "clearing twice changes nothing");
        let audit = app.audit(&org).await;
        let changes: Vec<&Value> = audit
            .iter()
            .filter(|r| r["action"] == json!("member.role_changed") && r["target_id"] == json!(user))
            .collect();
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0]["after"]["role_expires_at"], Value::Null);

        // Member is what an assignment falls back to: it cannot expire itself.
        let problem = app
            .patch(&path, &org.owner_token, json!({"role_id": org.member_role, "role_expires_at": in_ms(60_000)}))
            .await
            .problem(400, "VALIDATION_FAILED");
        assert_eq!(problem["field"], json!("role_expires_at"));
        // 400 for the instant comes before 422 for a role that is not the organization's.
        let problem = app
            .patch(&path, &org.owner_token, json!({"role_id": org.id, "role_expires_at": "tomorrow"}))
            .await
            .problem(400, "VALIDATION_FAILED");
        assert_eq!(problem["field"], json!("role_expires_at"));
        // A new role without role_expires_at runs until changed; with one, until then.
        let reviewer = app.role(&org, "Reviewer", &["org:projects:read"]).await;
        let timed = app
            .patch(&path, &org.owner_token, json!({"role_id": reviewer, "role_expires_at": in_ms(60_000)}))
            .await
            .expect(200)
            .json();
        assert!(timed["role_expires_at"].is_string());
        let open = app.patch(&path, &org.owner_token, json!({"role_id": role})).await.expect(200).json();
        assert_eq!(open["role_expires_at"], Value::Null);
        // The effective permissions say when the assignment ends.
        let timed = app
            .patch(&path, &org.owner_token, json!({"role_expires_at": later}))
            .await
            .expect(200)
            .json();
        let effective = app
            .get(&org.path(&format!("/members/{user}/permissions")), &org.owner_token)
            .await
            .expect(200)
            .json();
        assert_eq!(effective["role_expires_at"], timed["role_expires_at"]);
    }

    async fn a_change_after_the_instant_records_the_fall_back_first() {
        let app = spawn_app_with(NO_SWEEP).await;
        let org = app.org("enterprise").await;
        let role = deployer(&app, &org).await;
        let reviewer = app.role(&org, "Reviewer", &["org:projects:read"]).await;
        let until = in_ms(1000);
        let (user, _, before) = invite_until(&app, &org, &role, &until).await;
        pass(&until).await;

        // No sweep has run; the PATCH records the fall-back, then itself.
        let path = org.path(&format!("/members/{user}"));
        let now = app.patch(&path, &org.owner_token, json!({"role_id": reviewer})).await.expect(200).json();
        assert_eq!(now["role_name"], json!("Reviewer"));
        let audit = app.audit(&org).await;
        let mine: Vec<&Value> = audit.iter().filter(|r| r["target_id"] == json!(user)).collect();
        let actions: Vec<&Value> = mine.iter().map(|r| &r["action"]).collect();
        assert_eq!(
            actions,
            [&json!("member.role_changed"), &json!("member.role_expired"), &json!("member.added")],
            "newest first"
        );
        assert_eq!(mine[1]["before"], before);
        assert_eq!(mine[1]["after"]["role_name"], json!("Member"));
        assert_eq!(mine[0]["before"], mine[1]["after"]);
        assert_eq!(mine[0]["after"], now);
    }
}
