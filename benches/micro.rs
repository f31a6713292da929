//! Micro-benchmarks of the request path and the storage path, each calling
//! the crate's own code: `cargo bench --bench micro`.
//!
//! Groups: `permission_check`, `batch_check`, `token_resolution`, `hmac_signing`,
//! `envelope_serialization`, `stored_job_codec`, `answer_insert`,
//! `role_write`, `role_write_durable`, `delivery_log_append`. Results and targets are in `BENCHMARKS.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use sled::Transactional;

use rolecall::domain::access::check_keys;
use rolecall::domain::audit::{AuditRecord, RequestIdText};
use rolecall::domain::change::Write;
use rolecall::domain::commands::roles::system_roles;
use rolecall::domain::delivery::{envelope, Answer, AttemptOutcome, LogRecord};
use rolecall::domain::event::{Event, EventKind};
use rolecall::domain::member::Membership;
use rolecall::domain::org_state::{Edit, OrgState};
use rolecall::domain::organization::{Organization, Plan};
use rolecall::domain::permissions::{Permission, PermissionSet};
use rolecall::domain::resources::decisions::{Decision, DecisionStatus};
use rolecall::domain::role::Role;
use rolecall::domain::user::{TokenKind, TokenRecord, User};
use rolecall::ids::{AuditId, DeliveryId, OrgId, ResourceId, RoleId, TokenId, UserId};
use rolecall::secrets::{new_token, sha256, Secret};
use rolecall::state::accounts::AccountTable;
use rolecall::state::directory::Directory;
use rolecall::storage::{SledStore, Tuning};
use rolecall::time::Timestamp;
use rolecall::webhooks::signing::{new_secret, service_signature, standard_signature};

/// Users (each with one token) in the account directory.
const USERS: usize = 1000;
/// Members of the organization the token resolution looks at.
const MEMBERS: usize = 10;

fn organization(plan: Plan) -> Organization {
    let now = Timestamp::now();
    Organization {
        id: OrgId::generate(),
        name: "Bench Org".into(),
        plan,
        created_at: now,
        updated_at: now,
    }
}

fn permission_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("permission_check");
    let member = PermissionSet::member_default();
    group.bench_function("contains_present", |b| {
        b.iter(|| black_box(member).contains(black_box(Permission::TeamInvite)))
    });
    group.bench_function("contains_absent", |b| {
        b.iter(|| black_box(member).contains(black_box(Permission::TeamManage)))
    });

    let ten: Vec<&str> = member.sorted_keys().into_iter().take(10).collect();
    assert_eq!(ten.len(), 10);
    group.bench_function("parse_10_keys", |b| {
        b.iter(|| PermissionSet::parse(black_box(ten.as_slice())).unwrap())
    });
    let all_member: Vec<&str> = member.sorted_keys();
    assert_eq!(all_member.len(), 41);
    group.bench_function("parse_41_keys_member_default", |b| {
        b.iter(|| PermissionSet::parse(black_box(all_member.as_slice())).unwrap())
    });
    group.finish();
}

/// The account directory and org snapshots a running server holds, and the
/// token of one member.
struct AuthFixture {
    accounts: AccountTable,
    directory: Directory,
    org: OrgId,
    member_token: Secret,
    member: UserId,
}

fn auth_fixture() -> AuthFixture {
    let now = Timestamp::now();

    let mut users = Vec::with_capacity(USERS);
    let mut tokens = Vec::with_capacity(USERS);
    let mut plaintexts = Vec::with_capacity(USERS);
    for i in 0..USERS {
        let user = User {
            id: UserId::generate(),
            email: format!("user{i}@example.com"),
            name: Some(format!("User {i}")),
            created_at: now,
        };
        let secret = new_token();
        tokens.push(TokenRecord {
            id: TokenId::generate(),
            user_id: user.id,
            kind: if i % 2 == 0 {
                TokenKind::Session
            } else {
                TokenKind::Api
            },
            name: None,
            sha256: secret.digest(),
            created_at: now,
        });
        plaintexts.push(secret);
        users.push(user);
    }

    let org = organization(Plan::Enterprise);
    let (owner, member_role) = system_roles(org.id, now);
    // Every 97th user (spread over the table) is a member; the first is Owner.
    let members: Vec<Membership> = (0..MEMBERS)
        .map(|i| {
            let user = &users[i * 97];
            Membership {
                role_expires_at: None,
                organization_id: org.id,
                user_id: user.id,
                email: user.email.clone(),
                role_id: if i == 0 { owner.id } else { member_role.id },
                joined_at: now,
                updated_at: now,
            }
        })
        .collect();
    // The resolved caller: a Member (not Owner), so the role's own set is read.
    let caller = 5 * 97;
    let member = users[caller].id;
    let member_token = plaintexts.swap_remove(caller);
    let org_id = org.id;
    let directory = Directory::new(vec![OrgState::new(
        org,
        vec![owner, member_role],
        members,
        None,
    )]);
    let accounts = AccountTable::new(users, tokens);
    AuthFixture {
        accounts,
        directory,
        org: org_id,
        member_token,
        member,
    }
}

/// What `OrgAccess::resolve` does after reading the header and the path.
#[inline]
fn resolve(
    accounts: &AccountTable,
    directory: &Directory,
    token: &str,
    org: OrgId,
) -> PermissionSet {
    let user = accounts.user_for_token(token).unwrap();
    let state: Arc<OrgState> = directory.get(org).unwrap();
    state.permissions_of(user).unwrap()
}

/// `POST …/permissions/check` after authentication: the check of 10 and of
/// 100 keys (the limit: the 52 keys of the catalog, each asked about about
/// twice) and the answer's JSON.
fn batch_check(c: &mut Criterion) {
    let f = auth_fixture();
    let state = f.directory.get(f.org).unwrap();
    let catalog: Vec<String> = Permission::ALL.iter().map(|p| p.key().to_owned()).collect();
    let mut group = c.benchmark_group("batch_check");
    for n in [10usize, 100] {
        let keys: Vec<String> = catalog.iter().cycle().take(n).cloned().collect();
        let results = check_keys(&state, f.member, &keys).unwrap();
        assert_eq!(results.len(), n.min(catalog.len()));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("keys", n), &keys, |b, keys| {
            b.iter(|| {
                let results = check_keys(&state, black_box(f.member), black_box(keys)).unwrap();
                serde_json::to_vec(&results).unwrap()
            })
        });
    }
    group.finish();
}

fn token_resolution(c: &mut Criterion) {
    let f = auth_fixture();
    let token = f.member_token.expose();
    assert_eq!(
        resolve(&f.accounts, &f.directory, token, f.org),
        PermissionSet::member_default()
    );
    let mut group = c.benchmark_group("token_resolution");
    group.bench_function("token_to_permissions", |b| {
        b.iter(|| {
            resolve(
                &f.accounts,
                &f.directory,
                black_box(token),
                black_box(f.org),
            )
        })
    });
    // The three steps alone, to show where the time goes.
    group.bench_function("step_sha256_of_token", |b| {
        b.iter(|| sha256(black_box(token).as_bytes()))
    });
    group.bench_function("step_user_for_token", |b| {
        b.iter(|| f.accounts.user_for_token(black_box(token)))
    });
    group.bench_function("step_directory_get", |b| {
        b.iter(|| f.directory.get(black_box(f.org)))
    });
    let state = f.directory.get(f.org).unwrap();
    group.bench_function("step_permissions_of", |b| {
        b.iter(|| state.permissions_of(black_box(f.member)))
    });
    group.finish();
}

/// A 1 KiB envelope-like body.
fn body_1k() -> Vec<u8> {
    let mut body =
        br#"{"event":"member.added","occurred_at":"2026-01-01T00:00:00Z","data":{"note":""#
            .to_vec();
    while body.len() < 1024 - 3 {
        body.push(b'x');
    }
    body.extend_from_slice(br#""}}"#);
    assert_eq!(body.len(), 1024);
    body
}

fn hmac_signing(c: &mut Criterion) {
    let secret = new_secret();
    let body = body_1k();
    let delivery = DeliveryId::generate().to_string();
    let timestamp = Timestamp::now().millis().div_euclid(1000);
    let mut group = c.benchmark_group("hmac_signing");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("service_signature_1KiB", |b| {
        b.iter(|| service_signature(&secret, black_box(&body)))
    });
    group.bench_function("standard_signature_1KiB", |b| {
        b.iter(|| standard_signature(&secret, &delivery, timestamp, black_box(&body)))
    });
    group.finish();
}

fn envelope_serialization(c: &mut Criterion) {
    let now = Timestamp::now();
    let org = OrgId::generate();
    // `member.added`: its data is the membership's REST representation.
    let membership = Membership {
        role_expires_at: None,
        organization_id: org,
        user_id: UserId::generate(),
        email: "someone.with.a.longer.address@example.com".into(),
        role_id: RoleId::generate(),
        joined_at: now,
        updated_at: now,
    };
    let member_event = Event {
        kind: EventKind::MemberAdded,
        occurred_at: now,
        data: serde_json::to_value(membership.view("Member")).unwrap(),
    };
    // `decision.created` with about 1 KiB of data.
    let decision = Decision {
        id: ResourceId::generate(),
        organization_id: org,
        title: "Adopt group commit for every storage write".into(),
        statement: "All writes go through one sled transaction followed by a shared flush; \
                    writers wait for durability together instead of one fsync each."
            .repeat(3),
        rationale: "One fsync per write caps throughput at the disk's flush rate; sharing \
                    flushes keeps latency bounded while many writers are in flight."
            .repeat(2),
        tags: vec!["storage".into(), "performance".into(), "durability".into()],
        links: vec!["https://example.com/adr/42".into()],
        status: DecisionStatus::Pending,
        created_by: UserId::generate(),
        created_at: now,
        updated_at: now,
    };
    let decision_event = Event {
        kind: EventKind::DecisionCreated,
        occurred_at: now,
        data: serde_json::to_value(&decision).unwrap(),
    };

    let mut group = c.benchmark_group("envelope_serialization");
    for (name, event) in [
        ("member_added", &member_event),
        ("decision_created", &decision_event),
    ] {
        let size = envelope(event).unwrap().len();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new(name, format!("{size}B")), |b| {
            b.iter(|| envelope(black_box(event)))
        });
    }
    group.finish();
}

/// A queued job as the store encodes it (bincode 2, serde mode), against
/// the same fields with the envelope as a sequence of numbers, as stored
/// before `domain::bytes`: the bytes are the same, the work is not.
fn stored_job_codec(c: &mut Criterion) {
    use rolecall::domain::delivery::Job;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct JobAsNumbers {
        delivery_id: DeliveryId,
        organization_id: OrgId,
        event: String,
        body: Vec<u8>,
        attempts_made: u8,
        due_at: Timestamp,
        created_at: Timestamp,
    }

    let config = bincode::config::standard();
    let job = Job::new(OrgId::generate(), EventKind::TaskCreated, vec![b'x'; 453]);
    let numbers = JobAsNumbers {
        delivery_id: job.delivery_id,
        organization_id: job.organization_id,
        event: job.event.clone(),
        body: job.body.clone(),
        attempts_made: job.attempts_made,
        due_at: job.due_at,
        created_at: job.created_at,
    };
    let stored = bincode::serde::encode_to_vec(&job, config).unwrap();
    assert_eq!(
        stored,
        bincode::serde::encode_to_vec(&numbers, config).unwrap()
    );
    let mut group = c.benchmark_group("stored_job_codec");
    group.bench_function("encode_453B_envelope_as_bytes", |b| {
        b.iter(|| bincode::serde::encode_to_vec(black_box(&job), config))
    });
    group.bench_function("encode_453B_envelope_as_numbers", |b| {
        b.iter(|| bincode::serde::encode_to_vec(black_box(&numbers), config))
    });
    group.bench_function("decode_453B_envelope_as_bytes", |b| {
        b.iter(|| bincode::serde::decode_from_slice::<Job, _>(black_box(&stored), config))
    });
    group.bench_function("decode_453B_envelope_as_numbers", |b| {
        b.iter(|| bincode::serde::decode_from_slice::<JobAsNumbers, _>(black_box(&stored), config))
    });
    group.finish();
}

/// 32 bytes that look random, from `n` (splitmix64): an idempotency scope,
/// which is a SHA-256.
fn scattered(n: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut state = n;
    for chunk in out.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out
}

/// A group-commit round's worth of 400-byte idempotency answers, inserted
/// in one sled transaction into a tree that holds 100,000 already: keyed
/// by their scope alone (each lands in a leaf anywhere in the tree), as
/// before, against keyed by their second of expiry, then scope (each lands
/// among its second's; 5,000 answers a second), against the whole round as
/// one record by its second and batch number, with the scopes' prefixes in
/// an index beside it, as `storage::sled::answer_batches` stores the
/// answers committed with their changes.
fn answer_insert(c: &mut Criterion) {
    const HELD: u64 = 100_000;
    const ROUND: u64 = 32;
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new().path(dir.path()).open().unwrap();
    let value = vec![b'a'; 400];
    /// The key of the `n`th answer.
    type KeyOf = fn(u64) -> Vec<u8>;
    let by_scope: KeyOf = |n| scattered(n).to_vec();
    let by_expiry: KeyOf = |n| {
        let second = u32::try_from(1_800_000_000 + n / 5_000).unwrap();
        let mut key = second.to_be_bytes().to_vec();
        key.extend_from_slice(&scattered(n));
        key
    };
    let layouts = [("by_scope", by_scope), ("by_expiry", by_expiry)];
    let mut group = c.benchmark_group("answer_insert");
    group.throughput(Throughput::Elements(ROUND));
    for (name, key) in layouts {
        let tree = db.open_tree(name).unwrap();
        for n in 0..HELD {
            tree.insert(key(n), value.as_slice()).unwrap();
        }
        let mut next = HELD;
        group.bench_function(BenchmarkId::new("round_of_32", name), |b| {
            b.iter(|| {
                let first = next;
                next += ROUND;
                tree.transaction(|view| {
                    for n in first..first + ROUND {
                        view.insert(key(n), value.as_slice())?;
                    }
                    Ok::<_, sled::transaction::ConflictableTransactionError>(())
                })
                .unwrap();
            })
        });
    }
    let (batches, index) = (
        db.open_tree("batches").unwrap(),
        db.open_tree("batch_index").unwrap(),
    );
    let batch_key = |n: u64| {
        let second = u32::try_from(1_800_000_000 + n / 5_000).unwrap();
        let mut key = second.to_be_bytes().to_vec();
        key.extend_from_slice(&u32::try_from(n / ROUND).unwrap().to_be_bytes());
        key
    };
    let round = |first: u64| {
        let (mut record, mut prefixes) = (vec![1u8], vec![1u8]);
        for n in first..first + ROUND {
            let scope = scattered(n);
            record.extend_from_slice(&scope);
            record.extend_from_slice(&400u32.to_be_bytes());
            record.extend_from_slice(&value);
            prefixes.extend_from_slice(&scope[..8]);
        }
        (record, prefixes)
    };
    for first in (0..HELD).step_by(ROUND as usize) {
        let (record, prefixes) = round(first);
        batches.insert(batch_key(first), record).unwrap();
        index.insert(batch_key(first), prefixes).unwrap();
    }
    let mut next = HELD;
    group.bench_function(BenchmarkId::new("round_of_32", "one_record"), |b| {
        b.iter(|| {
            let first = next;
            next += ROUND;
            let (record, prefixes) = round(first);
            (&batches, &index)
                .transaction(|(batches, index)| {
                    batches.insert(batch_key(first), record.as_slice())?;
                    index.insert(batch_key(first), prefixes.as_slice())?;
                    Ok::<_, sled::transaction::ConflictableTransactionError>(())
                })
                .unwrap();
        })
    });
    group.finish();
}

/// A stored organization with Owner, Member and one custom role.
fn seeded_storage() -> (tempfile::TempDir, SledStore, Role) {
    let dir = tempfile::tempdir().unwrap();
    let storage = SledStore::open(dir.path(), Tuning::default(), None).unwrap();
    let now = Timestamp::now();
    let org = organization(Plan::Enterprise);
    let (owner, member) = system_roles(org.id, now);
    let custom = Role {
        id: RoleId::generate(),
        organization_id: org.id,
        name: "Reviewer".into(),
        description: "Reads everything, comments, accepts or rejects decisions.".into(),
        permissions: PermissionSet::parse(&[
            "org:decisions:read",
            "org:decisions:accept",
            "org:decisions:reject",
            "org:comments:create",
            "org:comments:read",
            "org:projects:read",
        ])
        .unwrap(),
        is_immutable: false,
        is_system: false,
        revision: 1,
        created_at: now,
        updated_at: now,
    };
    // System roles are accepted only before their organization is stored.
    storage
        .append(&[
            Write::Edit(Edit::PutRole(owner)),
            Write::Edit(Edit::PutRole(member)),
            Write::Edit(Edit::PutRole(custom.clone())),
            Write::Edit(Edit::PutOrg(org)),
        ])
        .unwrap();
    // On disk before measuring.
    current_thread().block_on(storage.durable()).unwrap();
    (dir, storage, custom)
}

/// A current-thread runtime to await `SledStore::durable` (a oneshot reply
/// from the flush thread: no I/O or timer driver needed).
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// The writes of one `PATCH …/roles/{id}` as the organization actor commits
/// them: the updated role and its audit record (before/after as JSON text).
fn role_update(role: &mut Role, request_id: &RequestIdText) -> Vec<Write> {
    let before = serde_json::to_string(&role.view(3)).unwrap();
    role.revision += 1;
    role.updated_at = Timestamp::now();
    let after = serde_json::to_string(&role.view(3)).unwrap();
    let audit = AuditRecord {
        id: AuditId::generate(),
        organization_id: role.organization_id,
        actor_user_id: Some(UserId::generate()),
        action: "role.updated".into(),
        target_type: "role".into(),
        target_id: role.id.to_string(),
        before: Some(before),
        after: Some(after),
        request_id: request_id.0.clone(),
        occurred_at: role.updated_at,
    };
    vec![
        Write::Edit(Edit::PutRole(role.clone())),
        Write::Audit(audit),
    ]
}

fn role_write(c: &mut Criterion) {
    let (_dir, storage, mut role) = seeded_storage();
    let request_id = RequestIdText::generate();
    let mut group = c.benchmark_group("role_write");
    group.bench_function("commit_role_and_audit", |b| {
        b.iter_batched(
            || role_update(&mut role, &request_id),
            |writes| storage.append(&writes).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.finish();
    current_thread().block_on(storage.durable()).unwrap();
}

fn role_write_durable(c: &mut Criterion) {
    let (_dir, storage, mut role) = seeded_storage();
    let request_id = RequestIdText::generate();
    let runtime = current_thread();
    // One writer alone: a commit-thread round (its window included) and a flush.
    let mut group = c.benchmark_group("role_write_durable");
    group.bench_function("commit_durably", |b| {
        b.iter_batched(
            || role_update(&mut role, &request_id),
            |writes| runtime.block_on(storage.commit(writes)).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// `n` records of first attempts that succeeded, each carrying its ~1 KiB
/// envelope and a short response body, as the delivery actor logs them.
fn log_batch(org: OrgId, body: &[u8], n: usize) -> Vec<Write> {
    let outcome = AttemptOutcome::Answered(Answer {
        status: 200,
        body: r#"{"ok":true}"#.into(),
        latency_ms: 12,
        started_at: Timestamp::now(),
    });
    (0..n)
        .map(|_| {
            Write::Log(LogRecord::of_attempt(
                org,
                DeliveryId::generate(),
                "member.added",
                1,
                &outcome,
                body.to_vec(),
            ))
        })
        .collect()
}

fn delivery_log_append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let storage = SledStore::open(dir.path(), Tuning::default(), None).unwrap();
    let org = OrgId::generate();
    let body = body_1k();
    let mut group = c.benchmark_group("delivery_log_append");
    for n in [1usize, 256] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("commit_batch", n), &n, |b, &n| {
            b.iter_batched(
                || log_batch(org, &body, n),
                |batch| storage.append(&batch).unwrap(),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
    current_thread().block_on(storage.durable()).unwrap();
}

criterion_group!(
    micro,
    permission_check,
    batch_check,
    token_resolution,
    hmac_signing,
    envelope_serialization,
    stored_job_codec,
    answer_insert,
    role_write,
    role_write_durable,
    delivery_log_append
);
criterion_main!(micro);
