//! The `startup` scenario: seeds a data directory with many organizations
//! and pending deliveries, starts the real binary on it, and measures the
//! time until it serves and its resident memory once it does.

use std::path::Path;

use serde::Serialize;

use crate::domain::commands::roles::system_roles;
use crate::domain::delivery::Job;
use crate::domain::event::EventKind;
use crate::domain::member::Membership;
use crate::domain::org_state::Edit;
use crate::domain::organization::{Organization, Plan};
use crate::domain::permissions::PermissionSet;
use crate::domain::role::Role;
use crate::domain::user::User;
use crate::domain::webhook::{EventSet, WebhookEndpoint};
use crate::ids::{OrgId, RoleId, UserId};
use crate::load::server::ServerProcess;
use crate::storage::{Storage, Write};
use crate::time::Timestamp;
use crate::webhooks::signing::new_secret;

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
/// webhook each, and `pending` undelivered jobs spread over them.
pub fn seed(dir: &Path, orgs: usize, pending: usize) -> Result<(), String> {
    let storage = Storage::open(dir).map_err(|e| e.to_string())?;
    let now = Timestamp::now();
    let mut org_ids = Vec::with_capacity(orgs);
    for i in 0..orgs {
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
                organization_id: org.id,
                user_id: user.id,
                email: user.email.clone(),
                role_id: role,
                joined_at: now,
                updated_at: now,
            };
            writes.push(Write::PutUser(user.clone(), user.email.clone()));
            writes.push(Write::Edit(Edit::PutMember(membership)));
        }
        let endpoint = WebhookEndpoint {
            organization_id: org.id,
            url: "http://127.0.0.1:9/hook".into(),
            events: EventSet::parse(&["task.created".to_string()]).map_err(|e| e.to_string())?,
            secret: new_secret(),
            created_at: now,
            updated_at: now,
        };
        writes.push(Write::Edit(Edit::PutWebhook(endpoint)));
        writes.push(Write::Edit(Edit::PutOrg(org.clone())));
        storage.commit(&writes).map_err(|e| e.to_string())?;
        org_ids.push(org.id);
    }
    // Pending deliveries, due an hour from now so nothing is attempted while measuring.
    let later = Timestamp(now.millis() + 3_600_000);
    for chunk in (0..pending).collect::<Vec<_>>().chunks(1000) {
        let writes: Vec<Write> = chunk
            .iter()
            .map(|i| {
                let body = br#"{"event":"task.created","occurred_at":"2026-11-22T10:00:00.000Z","data":{}}"#;
                let mut job = Job::new(org_ids[i % org_ids.len().max(1)], EventKind::TaskCreated, body.to_vec());
                job.due_at = later;
                Write::PutJob(job)
            })
            .collect();
        storage.commit(&writes).map_err(|e| e.to_string())?;
    }
    storage.close().map_err(|e| e.to_string())
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
