//! The `startup` scenario: seeds a data directory with many organizations
//! and pending deliveries, starts the real binary on it, and measures the
//! time until it serves and its resident memory once it does.

use std::path::Path;

use serde::Serialize;

use crate::load::server::ServerProcess;
use rolecall::commit::{Commit, CommitPath};
use rolecall::domain::change::Write;
use rolecall::domain::commands::roles::system_roles;
use rolecall::domain::delivery::Job;
use rolecall::domain::event::EventKind;
use rolecall::domain::member::Membership;
use rolecall::domain::org_state::Edit;
use rolecall::domain::organization::{Organization, Plan};
use rolecall::domain::permissions::PermissionSet;
use rolecall::domain::role::Role;
use rolecall::domain::user::User;
use rolecall::domain::webhook::{EventSet, WebhookEndpoint};
use rolecall::ids::{OrgId, RoleId, UserId};
use rolecall::storage::{Store, Tuning};
use rolecall::time::Timestamp;
use rolecall::webhooks::signing::new_secret;

/// What the scenario measured.
#[derive(Clone, Debug, Serialize)]
pub struct StartupResult {
    /// Organizations seeded.
    pub organizations: usize,
    /// Pending deliveries seeded.
    pub pending_deliveries: usize,
    /// From process start to the first 200 of `/healthz`.
    pub serving_after_ms: u128,
    /// Resident memory of the server once serving (no org actor running).
    pub resident_mb: f64,
}

/// Seeds `dir`: `orgs` organizations with 10 custom roles, 10 members and a
/// webhook each, and `pending` undelivered jobs spread over them, through
/// the commit path (many commits at once, so they share flushes).
pub fn seed(dir: &Path, orgs: usize, pending: usize) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let store = Store::open_sled(dir, Tuning::default(), None).map_err(|e| e.to_string())?;
        let commit = CommitPath::offline(store.clone());
        let now = Timestamp::now();
        let mut org_ids = Vec::with_capacity(orgs);
        let mut changes = Vec::with_capacity(orgs);
        for i in 0..orgs {
            let (org, writes) = seeded_org(i, now)?;
            org_ids.push(org);
            changes.push(Commit::writes(writes));
        }
        commit_all(&commit, changes).await?;
        // Pending deliveries, due an hour from now so nothing is attempted while measuring.
        let later = Timestamp(now.millis() + 3_600_000);
        let body =
            br#"{"event":"task.created","occurred_at":"2026-11-22T10:00:00.000Z","data":{}}"#;
        let jobs = (0..pending).map(|i| {
            let mut job = Job::new(
                org_ids[i % org_ids.len().max(1)],
                EventKind::TaskCreated,
                body.to_vec(),
            );
            job.due_at = later;
            Write::PutJob(job)
        });
        let mut changes = Vec::new();
        let mut chunk = Vec::with_capacity(1000);
        for job in jobs {
            chunk.push(job);
            if chunk.len() == 1000 {
                changes.push(Commit::writes(std::mem::take(&mut chunk)));
            }
        }
        changes.push(Commit::writes(chunk));
        commit_all(&commit, changes).await?;
        drop(commit);
        store.close().await.map_err(|e| e.to_string())
    })
}

/// Commits `changes`, 64 at a time.
async fn commit_all(commit: &CommitPath, changes: Vec<Commit>) -> Result<(), String> {
    let mut changes = changes.into_iter().peekable();
    while changes.peek().is_some() {
        let round = changes
            .by_ref()
            .take(64)
            .map(|change| commit.commit(change));
        for result in futures_util::future::join_all(round).await {
            result.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Organization `i`: Owner and Member, 10 custom roles, 10 members (one an
/// Owner) and a webhook.
fn seeded_org(i: usize, now: Timestamp) -> Result<(OrgId, Vec<Write>), String> {
    let org = Organization {
        id: OrgId::generate(),
        name: format!("Org {i}"),
        plan: Plan::Enterprise,
        created_at: now,
        updated_at: now,
    };
    let (owner, member) = system_roles(org.id, now);
    let mut writes = vec![
        Write::Edit(Edit::PutRole(owner.clone())),
        Write::Edit(Edit::PutRole(member.clone())),
    ];
    for r in 0..10 {
        let role = Role {
            id: RoleId::generate(),
            organization_id: org.id,
            name: format!("Custom {r}"),
            description: "seeded".into(),
            permissions: PermissionSet::member_default(),
            is_immutable: false,
            is_system: false,
            revision: 1,
            created_at: now,
            updated_at: now,
        };
        writes.push(Write::Edit(Edit::PutRole(role)));
    }
    for m in 0..10 {
        let user = User {
            id: UserId::generate(),
            email: format!("u{i}-{m}@example.test"),
            name: None,
            created_at: now,
        };
        let role = if m == 0 { owner.id } else { member.id };
        let membership = Membership {
            role_expires_at: None,
            organization_id: org.id,
            user_id: user.id,
            email: user.email.clone(),
            role_id: role,
            joined_at: now,
            updated_at: now,
        };
        writes.push(Write::PutUser(user));
        writes.push(Write::Edit(Edit::PutMember(membership)));
    }
    let endpoint = WebhookEndpoint {
        organization_id: org.id,
        url: "http://127.0.0.1:9/hook".into(),
        events: EventSet::parse(&["task.created".to_string()]).map_err(|e| e.to_string())?,
        secret: new_secret(),
        created_at: now,
        updated_at: now,
        disabled: None,
        failing_since: None,
    };
    writes.push(Write::Edit(Edit::PutWebhook(endpoint)));
    writes.push(Write::Edit(Edit::PutOrg(org.clone())));
    Ok((org.id, writes))
}

/// Starts `rolecall serve` on `dir`; measures time to serving and RSS.
pub fn measure(dir: &Path, orgs: usize, pending: usize) -> Result<StartupResult, String> {
    let env = [
        (
            "ROLECALL_ADMIN__TOKEN".to_owned(),
            "startup-measurement".to_owned(),
        ),
        ("ROLECALL_LOG__LEVEL".to_owned(), "warn".to_owned()),
    ];
    let (server, serving) = ServerProcess::start(dir, &env, false)?;
    Ok(StartupResult {
        organizations: orgs,
        pending_deliveries: pending,
        serving_after_ms: serving.as_millis(),
        resident_mb: server.resident_mb(),
    })
}
