//! Writes as SQL: the writes of one transaction, however many requests
//! they come from, become at most one statement per table and kind of
//! change, each taking its rows as arrays (`unnest`), so that a batch of
//! a hundred events costs the statements of one.
//!
//! Within a batch the last write of a row wins, as it would applied in
//! order; that lets upserts and deletes of one table run as one statement
//! each. Foreign keys are deferred to the commit, so the order of the
//! statements does not matter.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::channels::own_channel;
use super::handed::{Line, Payloads, HANDED};
use super::rows::{name_of, owned_text, permission_keys, time};
use crate::domain::change::Write;
use crate::domain::names::fold;
use crate::domain::org_state::Edit;
use crate::ids::OrgId;
use crate::secrets::SealingKey;
use crate::storage::sealed::sealed;
use crate::storage::StoreError;

/// One statement and its parameters.
pub struct Statement {
    /// The SQL (one of the constants below, prepared once per connection).
    pub sql: &'static str,
    /// Its parameters, one array per column.
    pub params: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Statement {
    /// The parameters as tokio-postgres takes them.
    pub fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

/// `statements` as one: the first ones as data-modifying `WITH` queries of
/// the last, their parameters numbered on. PostgreSQL runs them all, on
/// one snapshot, in one implicit transaction, and checks the foreign keys
/// at its end; since a batch writes each row at most once (the last write
/// wins), no part needs to see another's rows. `None` when there is
/// nothing to run.
pub fn combined(statements: &[Statement]) -> Option<(Cow<'static, str>, Vec<&(dyn ToSql + Sync)>)> {
    let params: Vec<&(dyn ToSql + Sync)> = statements.iter().flat_map(Statement::params).collect();
    match statements {
        [] => None,
        [one] => Some((Cow::Borrowed(one.sql), params)),
        [first @ .., last] => {
            let mut sql = String::from("WITH ");
            let mut offset = 0;
            for (i, statement) in first.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("w{i} AS ("));
                renumbered(statement.sql, offset, &mut sql);
                sql.push(')');
                offset += statement.params.len();
            }
            sql.push(' ');
            renumbered(last.sql, offset, &mut sql);
            Some((Cow::Owned(sql), params))
        }
    }
}

/// Appends `sql` to `out` with every parameter `$n` as `$(n + offset)`.
fn renumbered(sql: &str, offset: usize, out: &mut String) {
    let mut rest = sql;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..=dollar]);
        rest = &rest[dollar + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
}

/// Declares the columns of one statement: a vector per column, and the
/// statement's SQL.
macro_rules! rows {
    ($name:ident = $sql:expr; { $($column:ident: $ty:ty),+ $(,)? }) => {
        #[derive(Default)]
        struct $name { $($column: Vec<$ty>,)+ }

        impl $name {
            const SQL: &'static str = $sql;

            fn into_statement(self, into: &mut Vec<Statement>) {
                let rows = [$(self.$column.len()),+][0];
                if rows > 0 {
                    into.push(Statement {
                        sql: Self::SQL,
                        params: vec![$(Box::new(self.$column)),+],
                    });
                }
            }
        }
    };
}

rows!(Users = "INSERT INTO users (id, email, email_folded, name, created_at) \
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) \
     ON CONFLICT (id) DO UPDATE SET email = EXCLUDED.email, email_folded = EXCLUDED.email_folded, \
     name = EXCLUDED.name";
    { id: Uuid, email: String, folded: String, name: Option<String>, created_at: SystemTime });

rows!(Tokens = "INSERT INTO tokens (sha256, id, user_id, kind, name, created_at) \
     SELECT * FROM unnest($1::bytea[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::timestamptz[]) \
     ON CONFLICT (sha256) DO NOTHING";
    { sha256: Vec<u8>, id: Uuid, user_id: Uuid, kind: String, name: Option<String>, created_at: SystemTime });

rows!(TokenDeletes = "DELETE FROM tokens WHERE sha256 = ANY($1::bytea[])"; { sha256: Vec<u8> });

rows!(Orgs = "INSERT INTO organizations (id, name, plan, created_at, updated_at, revision) \
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], \
     $6::bigint[]) \
     ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, plan = EXCLUDED.plan, \
     updated_at = EXCLUDED.updated_at, revision = EXCLUDED.revision";
    { id: Uuid, name: String, plan: String, created_at: SystemTime, updated_at: SystemTime, revision: i64 });

rows!(Revisions = "UPDATE organizations AS o SET revision = e.next \
     FROM unnest($1::uuid[], $2::bigint[]) AS e (id, next) WHERE o.id = e.id";
    { org: Uuid, next: i64 });

// The permission keys of each role travel as one comma-joined text (an
// array of arrays must be rectangular).
rows!(Roles = "INSERT INTO roles (organization_id, id, name, description, permissions, \
     is_immutable, is_system, revision, created_at, updated_at) \
     SELECT o, i, n, d, CASE WHEN p = '' THEN '{}'::text[] ELSE string_to_array(p, ',') END, \
     im, sy, r, c, u FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], \
     $6::bool[], $7::bool[], $8::int8[], $9::timestamptz[], $10::timestamptz[]) \
     AS t(o, i, n, d, p, im, sy, r, c, u) \
     ON CONFLICT (organization_id, id) DO UPDATE SET name = EXCLUDED.name, \
     description = EXCLUDED.description, permissions = EXCLUDED.permissions, \
     is_immutable = EXCLUDED.is_immutable, is_system = EXCLUDED.is_system, \
     revision = EXCLUDED.revision, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at";
    { org: Uuid, id: Uuid, name: String, description: String, permissions: String,
      is_immutable: bool, is_system: bool, revision: i64, created_at: SystemTime, updated_at: SystemTime });

rows!(RoleDeletes = "DELETE FROM roles WHERE (organization_id, id) IN \
     (SELECT * FROM unnest($1::uuid[], $2::uuid[]))"; { org: Uuid, id: Uuid });

rows!(Members = "INSERT INTO memberships (organization_id, user_id, email, role_id, joined_at, updated_at, \
     role_expires_at) \
     SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::uuid[], $5::timestamptz[], $6::timestamptz[], \
     $7::timestamptz[]) \
     ON CONFLICT (organization_id, user_id) DO UPDATE SET email = EXCLUDED.email, \
     role_id = EXCLUDED.role_id, joined_at = EXCLUDED.joined_at, updated_at = EXCLUDED.updated_at, \
     role_expires_at = EXCLUDED.role_expires_at";
    { org: Uuid, user: Uuid, email: String, role: Uuid, joined_at: SystemTime, updated_at: SystemTime,
      expires: Option<SystemTime> });

rows!(MemberDeletes = "DELETE FROM memberships WHERE (organization_id, user_id) IN \
     (SELECT * FROM unnest($1::uuid[], $2::uuid[]))"; { org: Uuid, user: Uuid });

rows!(Webhooks = "INSERT INTO webhooks (organization_id, url, events, secret, created_at, updated_at, \
     disabled_at, disabled_reason, failing_since) \
     SELECT o, u, CASE WHEN e = '' THEN '{}'::text[] ELSE string_to_array(e, ',') END, s, c, up, da, dr, fs \
     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], \
     $7::timestamptz[], $8::text[], $9::timestamptz[]) AS t(o, u, e, s, c, up, da, dr, fs) \
     ON CONFLICT (organization_id) DO UPDATE SET url = EXCLUDED.url, events = EXCLUDED.events, \
     secret = EXCLUDED.secret, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, \
     disabled_at = EXCLUDED.disabled_at, disabled_reason = EXCLUDED.disabled_reason, \
     failing_since = EXCLUDED.failing_since";
    { org: Uuid, url: String, events: String, secret: String, created_at: SystemTime, updated_at: SystemTime,
      disabled_at: Option<SystemTime>, disabled_reason: Option<&'static str>, failing_since: Option<SystemTime> });

rows!(WebhookDeletes = "DELETE FROM webhooks WHERE organization_id = ANY($1::uuid[])"; { org: Uuid });

rows!(Audit = "INSERT INTO audit_log (organization_id, id, actor_user_id, action, target_type, \
     target_id, before, after, request_id, occurred_at) \
     SELECT o, i, a, ac, tt, ti, b::json, af::json, r, t FROM unnest($1::uuid[], $2::uuid[], \
     $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], \
     $10::timestamptz[]) AS x(o, i, a, ac, tt, ti, b, af, r, t)";
    { org: Uuid, id: Uuid, actor: Option<Uuid>, action: String, target_type: String,
      target_id: String, before: Option<String>, after: Option<String>, request_id: String,
      occurred_at: SystemTime });

// A resource's insert, and the columns of both statements below: a
// created resource (a new id) is a plain insert, no speculative insertion.
macro_rules! resource_rows {
    ($name:ident, $conflict:expr) => {
        rows!($name = concat!(
            "INSERT INTO resources (organization_id, kind, id, parent_id, data) \
             SELECT o, k, i, p, d::json FROM unnest($1::uuid[], $2::text[], $3::uuid[], \
             $4::uuid[], $5::text[]) AS t(o, k, i, p, d)",
            $conflict
        );
            { org: Uuid, kind: &'static str, id: Uuid, parent: Option<Uuid>, data: String });
    };
}
resource_rows!(NewResources, "");
resource_rows!(
    Resources,
    " ON CONFLICT (organization_id, kind, id) DO UPDATE SET parent_id = EXCLUDED.parent_id, \
     data = EXCLUDED.data"
);

rows!(ResourceDeletes = "DELETE FROM resources WHERE (organization_id, kind, id) IN \
     (SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[]))";
    { org: Uuid, kind: &'static str, id: Uuid });

// A job's insert, and the columns of both statements below. A new job
// (no attempt made yet: a fresh delivery id) is a plain insert: no
// speculative insertion, no confirmation record in the WAL. One the
// committing node holds at once is marked held by its lease (`claim`,
// `claim_read`) in its insert.
macro_rules! job_rows {
    ($name:ident, $conflict:expr) => {
        rows!($name = concat!(
            "INSERT INTO outbox (organization_id, delivery_id, event, body, attempts_made, due_at, \
             created_at, claim, claim_read) \
             SELECT o, d, e, b::json, a, du, c, cl, cr FROM unnest($1::uuid[], $2::uuid[], $3::text[], \
             $4::text[], $5::int2[], $6::timestamptz[], $7::timestamptz[], $8::int8[], $9::int8[]) \
             AS t(o, d, e, b, a, du, c, cl, cr)",
            $conflict
        );
            { org: Uuid, delivery: Uuid, event: String, body: String, attempts_made: i16,
              due_at: SystemTime, created_at: SystemTime, claim: Option<i64>, claim_read: Option<i64> });
    };
}
job_rows!(NewJobs, "");
// A job attempted already, copied from another store: inserted, or
// updated in place (its row keeps its marks).
job_rows!(
    Jobs,
    " ON CONFLICT (organization_id, delivery_id) DO UPDATE SET event = EXCLUDED.event, \
     body = EXCLUDED.body, attempts_made = EXCLUDED.attempts_made, due_at = EXCLUDED.due_at, \
     created_at = EXCLUDED.created_at"
);
// A job waiting for its retry: its attempts and due time updated in
// place (its row keeps its envelope and marks, which are not sent), never
// inserted again (see `Write::RetryJob`).
rows!(Retries = "UPDATE outbox AS x SET attempts_made = t.a, due_at = t.du \
     FROM unnest($1::uuid[], $2::uuid[], $3::int2[], $4::timestamptz[]) AS t(o, d, a, du) \
     WHERE x.organization_id = t.o AND x.delivery_id = t.d";
    { org: Uuid, delivery: Uuid, attempts_made: i16, due_at: SystemTime });

/// The update of retried jobs, public for the test of its plans.
pub const RETRIES_SQL: &str = Retries::SQL;

rows!(JobDeletes = "DELETE FROM outbox WHERE (organization_id, delivery_id) IN \
     (SELECT * FROM unnest($1::uuid[], $2::uuid[]))"; { org: Uuid, delivery: Uuid });

/// The delete of finished jobs, public for the test of its plans.
pub const JOB_DELETES_SQL: &str = JobDeletes::SQL;

// Other nodes told of new jobs of organizations they hold: one row per
// node and organization, or the jobs themselves handed over (see
// `handed`). A query, not a change: it must be the main query
// of the combined statement (PostgreSQL runs a `WITH` query that is not a
// change only when it is read), so it comes last. The notifications go out
// when the transaction commits, with the rows they announce.
rows!(Tells = "SELECT pg_notify(c, o) FROM unnest($1::text[], $2::text[]) AS t(c, o)";
    { channel: String, org: String });

rows!(Logs = "INSERT INTO delivery_log (organization_id, id, delivery_id, event, attempt, outcome, \
     response_code, response_body, latency_ms, error, attempted_at, envelope) \
     SELECT o, i, d, e, a, oc, rc, rb, l, er, at, en::json FROM unnest($1::uuid[], $2::uuid[], \
     $3::uuid[], $4::text[], $5::int2[], $6::text[], $7::int4[], $8::text[], $9::int8[], \
     $10::text[], $11::timestamptz[], $12::text[]) AS t(o, i, d, e, a, oc, rc, rb, l, er, at, en)";
    { org: Uuid, id: Uuid, delivery: Uuid, event: String, attempt: Option<i16>, outcome: String,
      response_code: Option<i32>, response_body: Option<String>, latency_ms: Option<i64>,
      error: Option<String>, attempted_at: SystemTime, envelope: String });

// What the records of a batch add to each organization's count (see
// migration 5), one row per organization.
rows!(LogCounts = "INSERT INTO delivery_log_counts (organization_id, records) \
     SELECT * FROM unnest($1::uuid[], $2::int8[]) \
     ON CONFLICT (organization_id) DO UPDATE \
     SET records = delivery_log_counts.records + EXCLUDED.records";
    { org: Uuid, added: i64 });

rows!(AdminToken = "INSERT INTO admin_token (sha256) SELECT * FROM unnest($1::bytea[]) \
     ON CONFLICT (singleton) DO NOTHING"; { sha256: Vec<u8> });

/// Records the answers of the requests that hold their claims: each
/// key's row, when its fingerprint is the request's (a row taken over by
/// another request after its claim lapsed keeps that one's), or a new row
/// if the claim's row is gone. Written as an insert, so that each row is
/// found by the arbiter index whatever the table's size: planned as a
/// join, the plan PostgreSQL kept from the table's first moments, when it
/// was nearly empty, hashed the batch and read the whole table on every
/// call (2.8 ms per call after 20,000 keys).
pub const ANSWER_SQL: &str = "INSERT INTO idempotency_keys AS k \
       (scope, fingerprint, answered, live_until, status, headers, body) \
     SELECT scope, fingerprint, true, expires, status, headers::json, body \
       FROM unnest((SELECT $1::bytea[]), (SELECT $2::bytea[]), (SELECT $3::timestamptz[]), \
                   (SELECT $4::int4[]), (SELECT $5::text[]), (SELECT $6::bytea[])) \
            AS g (scope, fingerprint, expires, status, headers, body) \
      ORDER BY scope \
     ON CONFLICT (scope) DO UPDATE SET answered = true, live_until = EXCLUDED.live_until, \
            status = EXCLUDED.status, headers = EXCLUDED.headers, body = EXCLUDED.body \
      WHERE k.fingerprint = EXCLUDED.fingerprint";

// The answers of keyed requests, recorded with the changes they answer.
rows!(KeyAnswers = ANSWER_SQL;
    { scope: Vec<u8>, fingerprint: Vec<u8>, expires: SystemTime, status: i32, headers: String,
      body: Vec<u8> });

/// The rows of one batch, by statement.
#[derive(Default)]
struct Tables {
    users: Users,
    tokens: Tokens,
    token_deletes: TokenDeletes,
    orgs: Orgs,
    revisions: Revisions,
    roles: Roles,
    role_deletes: RoleDeletes,
    members: Members,
    member_deletes: MemberDeletes,
    webhooks: Webhooks,
    webhook_deletes: WebhookDeletes,
    audit: Audit,
    new_resources: NewResources,
    resources: Resources,
    resource_deletes: ResourceDeletes,
    new_jobs: NewJobs,
    jobs: Jobs,
    retries: Retries,
    job_deletes: JobDeletes,
    logs: Logs,
    log_counts: LogCounts,
    admin_token: AdminToken,
    key_answers: KeyAnswers,
    tells: Tells,
    /// The (node, organization) pairs in `tells`.
    told: HashSet<(Uuid, Uuid)>,
    /// New jobs handed to other nodes: (node, epoch, organization, the
    /// job's part of a payload), last first.
    handing: Vec<(Uuid, i64, OrgId, Line)>,
}

impl Tables {
    /// Adds the payloads handing `handing`'s jobs to their holders, in
    /// commit order, to `tells`.
    fn hand_over(&mut self) {
        let mut payloads: Vec<(Uuid, Payloads)> = Vec::new();
        let mut index: HashMap<(Uuid, OrgId), usize> = HashMap::new();
        for (node, epoch, org, line) in self.handing.drain(..).rev() {
            let at = *index.entry((node, org)).or_insert_with(|| {
                payloads.push((node, Payloads::new(org, epoch)));
                payloads.len() - 1
            });
            payloads[at].1.push(&line);
        }
        for (node, payloads) in payloads {
            for payload in payloads.finish() {
                self.tells.channel.push(own_channel(node));
                self.tells.org.push(payload);
            }
        }
    }
}

/// Adds to `counts` what `logs` adds to each organization's log.
fn count_logs(logs: &Logs, counts: &mut LogCounts) {
    let mut added: HashMap<Uuid, i64> = HashMap::new();
    for org in &logs.org {
        *added.entry(*org).or_default() += 1;
    }
    // In a fixed order, so that concurrent transactions lock the count rows
    // in the same order.
    let mut added: Vec<(Uuid, i64)> = added.into_iter().collect();
    added.sort_unstable();
    for (org, n) in added {
        counts.org.push(org);
        counts.added.push(n);
    }
}

/// Which row a write changes, for "the last write of a row wins".
#[derive(Hash, PartialEq, Eq)]
enum RowKey {
    User(Uuid),
    Token([u8; 32]),
    Org(Uuid),
    Revision(Uuid),
    Role(Uuid, Uuid),
    Member(Uuid, Uuid),
    Webhook(Uuid),
    Resource(Uuid, &'static str, Uuid),
    Job(Uuid, Uuid),
    AdminToken,
    KeyAnswer([u8; 32]),
    /// Appends (audit and log records): every one is kept.
    Appended,
}

fn key_of(write: &Write) -> RowKey {
    match write {
        Write::Edit(edit) => match edit {
            Edit::PutOrg(org) => RowKey::Org(org.id.0),
            Edit::PutRole(role) => RowKey::Role(role.organization_id.0, role.id.0),
            Edit::DeleteRole(org, role) => RowKey::Role(org.0, role.0),
            Edit::PutMember(m) => RowKey::Member(m.organization_id.0, m.user_id.0),
            Edit::DeleteMember(org, user) => RowKey::Member(org.0, user.0),
            Edit::PutWebhook(endpoint) => RowKey::Webhook(endpoint.organization_id.0),
            Edit::DeleteWebhook(org) => RowKey::Webhook(org.0),
        },
        Write::PutUser(user) => RowKey::User(user.id.0),
        Write::PutToken(token) | Write::DeleteToken(token) => RowKey::Token(token.sha256),
        Write::Audit(_) | Write::Log(_) => RowKey::Appended,
        Write::PutJob(job) | Write::RetryJob(job) => {
            RowKey::Job(job.organization_id.0, job.delivery_id.0)
        }
        Write::DeleteJob(org, id) => RowKey::Job(org.0, id.0),
        Write::PutResource(org, value) | Write::NewResource(org, value) => {
            RowKey::Resource(org.0, value.kind().name(), value.id().0)
        }
        Write::DeleteResource(org, kind, id) => RowKey::Resource(org.0, kind.name(), id.0),
        Write::AdminToken(_) => RowKey::AdminToken,
        Write::KeyAnswer(answer) => RowKey::KeyAnswer(answer.scope),
        Write::OrgRevision(org, _) => RowKey::Revision(org.0),
    }
}

/// The statements that apply `writes` (in order: the last write of a row
/// wins), webhook secrets sealed with `key` when one is given.
pub fn statements<'w>(
    writes: impl DoubleEndedIterator<Item = &'w Write>,
    key: Option<&SealingKey>,
) -> Result<Vec<Statement>, StoreError> {
    let mut tables = Tables::default();
    let mut seen = HashSet::new();
    let mut revisions = HashMap::new();
    for write in writes.rev() {
        let row = key_of(write);
        if row != RowKey::Appended && !seen.insert(row) {
            continue;
        }
        match write {
            // Set with the organization's row when the batch writes it.
            Write::OrgRevision(org, next) => {
                revisions.insert(org.0, i64::try_from(*next).unwrap_or(i64::MAX));
            }
            write => add(&mut tables, write, key)?,
        }
    }
    for id in &tables.orgs.id {
        let revision = revisions.remove(id).unwrap_or(0);
        tables.orgs.revision.push(revision);
    }
    // In a fixed order, so that concurrent transactions lock the
    // organizations' rows in the same order.
    let mut revisions: Vec<(Uuid, i64)> = revisions.into_iter().collect();
    revisions.sort_unstable();
    for (org, next) in revisions {
        tables.revisions.org.push(org);
        tables.revisions.next.push(next);
    }
    tables.hand_over();
    let mut out = Vec::new();
    let mut t = tables;
    t.users.into_statement(&mut out);
    t.tokens.into_statement(&mut out);
    t.token_deletes.into_statement(&mut out);
    t.orgs.into_statement(&mut out);
    t.revisions.into_statement(&mut out);
    t.roles.into_statement(&mut out);
    t.members.into_statement(&mut out);
    t.member_deletes.into_statement(&mut out);
    t.role_deletes.into_statement(&mut out);
    t.webhooks.into_statement(&mut out);
    t.webhook_deletes.into_statement(&mut out);
    t.audit.into_statement(&mut out);
    t.new_resources.into_statement(&mut out);
    t.resources.into_statement(&mut out);
    t.resource_deletes.into_statement(&mut out);
    t.new_jobs.into_statement(&mut out);
    t.jobs.into_statement(&mut out);
    t.retries.into_statement(&mut out);
    t.job_deletes.into_statement(&mut out);
    count_logs(&t.logs, &mut t.log_counts);
    t.logs.into_statement(&mut out);
    t.log_counts.into_statement(&mut out);
    t.admin_token.into_statement(&mut out);
    t.key_answers.into_statement(&mut out);
    t.tells.into_statement(&mut out);
    Ok(out)
}

fn add(t: &mut Tables, write: &Write, key: Option<&SealingKey>) -> Result<(), StoreError> {
    match write {
        // Taken apart by `statements`, which sets it with the org's row.
        Write::OrgRevision(..) => {}
        Write::Edit(edit) => add_edit(t, edit, key)?,
        Write::PutUser(user) => {
            t.users.id.push(user.id.0);
            t.users.email.push(user.email.clone());
            t.users.folded.push(fold(&user.email));
            t.users.name.push(user.name.clone());
            t.users.created_at.push(time(user.created_at));
        }
        Write::PutToken(token) => {
            t.tokens.sha256.push(token.sha256.to_vec());
            t.tokens.id.push(token.id.0);
            t.tokens.user_id.push(token.user_id.0);
            t.tokens.kind.push(name_of(&token.kind)?);
            t.tokens.name.push(token.name.clone());
            t.tokens.created_at.push(time(token.created_at));
        }
        Write::DeleteToken(token) => t.token_deletes.sha256.push(token.sha256.to_vec()),
        Write::Audit(record) => {
            let a = &mut t.audit;
            a.org.push(record.organization_id.0);
            a.id.push(record.id.0);
            a.actor.push(record.actor_user_id.map(|u| u.0));
            a.action.push(record.action.clone());
            a.target_type.push(record.target_type.clone());
            a.target_id.push(record.target_id.clone());
            a.before.push(record.before.clone());
            a.after.push(record.after.clone());
            a.request_id.push(owned_text(&record.request_id));
            a.occurred_at.push(time(record.occurred_at));
        }
        Write::RetryJob(job) => {
            let r = &mut t.retries;
            r.org.push(job.organization_id.0);
            r.delivery.push(job.delivery_id.0);
            r.attempts_made.push(i16::from(job.attempts_made));
            r.due_at.push(time(job.due_at));
        }
        Write::PutJob(job) => {
            // A new job of an organization held elsewhere, by a node that
            // takes handed jobs: held under its epoch, and handed to it.
            let handed_to = job
                .holder_told
                .filter(|_| write.new_job().is_some())
                .and_then(|told| Some((told.node, told.handed?, Line::of(job)?)));
            let (claim, claim_read) = match (job.held_under, &handed_to) {
                (Some(held), _) => (Some(held.epoch), Some(held.mark)),
                (None, Some((_, epoch, _))) => (Some(*epoch), Some(HANDED)),
                (None, None) => (None, None),
            };
            macro_rules! push {
                ($j:expr) => {{
                    let j = $j;
                    j.org.push(job.organization_id.0);
                    j.delivery.push(job.delivery_id.0);
                    j.event.push(job.event.clone());
                    j.body.push(json_text(&job.body)?);
                    j.attempts_made.push(i16::from(job.attempts_made));
                    j.due_at.push(time(job.due_at));
                    j.created_at.push(time(job.created_at));
                    j.claim.push(claim);
                    j.claim_read.push(claim_read);
                }};
            }
            if write.new_job().is_some() {
                push!(&mut t.new_jobs)
            } else {
                push!(&mut t.jobs)
            }
            match (handed_to, job.holder_told) {
                (Some((node, epoch, line)), _) => {
                    t.handing.push((node, epoch, job.organization_id, line))
                }
                (None, Some(told)) => {
                    if t.told.insert((told.node, job.organization_id.0)) {
                        t.tells.channel.push(own_channel(told.node));
                        t.tells.org.push(job.organization_id.0.to_string());
                    }
                }
                (None, None) => {}
            }
        }
        Write::DeleteJob(org, id) => {
            t.job_deletes.org.push(org.0);
            t.job_deletes.delivery.push(id.0);
        }
        Write::Log(record) => {
            let l = &mut t.logs;
            l.org.push(record.organization_id.0);
            l.id.push(record.id.0);
            l.delivery.push(record.delivery_id.0);
            l.event.push(record.event.clone());
            l.attempt.push(record.attempt.map(i16::from));
            l.outcome.push(name_of(&record.outcome)?);
            l.response_code.push(record.response_code.map(i32::from));
            l.response_body
                .push(record.response_body.as_deref().map(owned_text));
            l.latency_ms.push(
                record
                    .latency_ms
                    .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
            );
            l.error.push(record.error.as_deref().map(owned_text));
            l.attempted_at.push(time(record.attempted_at));
            l.envelope.push(json_text(&record.envelope)?);
        }
        Write::PutResource(org, value) | Write::NewResource(org, value) => {
            macro_rules! push {
                ($r:expr) => {{
                    let r = $r;
                    r.org.push(org.0);
                    r.kind.push(value.kind().name());
                    r.id.push(value.id().0);
                    r.parent.push(value.parent().map(|p| p.0));
                    r.data
                        .push(serde_json::to_string(value).map_err(StoreError::codec)?);
                }};
            }
            if matches!(write, Write::NewResource(..)) {
                push!(&mut t.new_resources)
            } else {
                push!(&mut t.resources)
            }
        }
        Write::DeleteResource(org, kind, id) => {
            let r = &mut t.resource_deletes;
            r.org.push(org.0);
            r.kind.push(kind.name());
            r.id.push(id.0);
        }
        Write::AdminToken(hash) => t.admin_token.sha256.push(hash.to_vec()),
        Write::KeyAnswer(answer) => {
            let k = &mut t.key_answers;
            k.scope.push(answer.scope.to_vec());
            k.fingerprint.push(answer.fingerprint.to_vec());
            k.expires.push(time(answer.expires));
            k.status.push(i32::from(answer.answer.status));
            k.headers
                .push(serde_json::to_string(&answer.answer.headers).map_err(StoreError::codec)?);
            k.body.push(answer.answer.body.clone());
        }
    }
    Ok(())
}

fn add_edit(t: &mut Tables, edit: &Edit, key: Option<&SealingKey>) -> Result<(), StoreError> {
    match edit {
        Edit::PutOrg(org) => {
            t.orgs.id.push(org.id.0);
            t.orgs.name.push(org.name.clone());
            t.orgs.plan.push(name_of(&org.plan)?);
            t.orgs.created_at.push(time(org.created_at));
            t.orgs.updated_at.push(time(org.updated_at));
        }
        Edit::PutRole(role) => {
            let r = &mut t.roles;
            r.org.push(role.organization_id.0);
            r.id.push(role.id.0);
            r.name.push(role.name.clone());
            r.description.push(role.description.clone());
            r.permissions
                .push(permission_keys(role.permissions).join(","));
            r.is_immutable.push(role.is_immutable);
            r.is_system.push(role.is_system);
            r.revision
                .push(i64::try_from(role.revision).unwrap_or(i64::MAX));
            r.created_at.push(time(role.created_at));
            r.updated_at.push(time(role.updated_at));
        }
        Edit::DeleteRole(org, role) => {
            t.role_deletes.org.push(org.0);
            t.role_deletes.id.push(role.0);
        }
        Edit::PutMember(member) => {
            let m = &mut t.members;
            m.org.push(member.organization_id.0);
            m.user.push(member.user_id.0);
            m.email.push(member.email.clone());
            m.role.push(member.role_id.0);
            m.joined_at.push(time(member.joined_at));
            m.updated_at.push(time(member.updated_at));
            m.expires.push(member.role_expires_at.map(time));
        }
        Edit::DeleteMember(org, user) => {
            t.member_deletes.org.push(org.0);
            t.member_deletes.user.push(user.0);
        }
        Edit::PutWebhook(endpoint) => {
            let stored = sealed(endpoint, key)?;
            let w = &mut t.webhooks;
            w.org.push(stored.organization_id.0);
            w.url.push(stored.url.clone());
            w.events.push(stored.events.ids().join(","));
            w.secret.push(stored.secret.expose().to_owned());
            w.created_at.push(time(stored.created_at));
            w.updated_at.push(time(stored.updated_at));
            w.disabled_at.push(stored.disabled.map(|d| time(d.at)));
            w.disabled_reason
                .push(stored.disabled.map(|d| d.reason.as_str()));
            w.failing_since.push(stored.failing_since.map(time));
        }
        Edit::DeleteWebhook(org) => t.webhook_deletes.org.push(org.0),
    }
    Ok(())
}

/// An envelope's bytes as the text of a `json` column, which keeps them
/// exactly (they are what was signed).
fn json_text(bytes: &[u8]) -> Result<String, StoreError> {
    String::from_utf8(bytes.to_vec()).map_err(StoreError::codec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(sql: &'static str, params: usize) -> Statement {
        Statement {
            sql,
            params: (0..params)
                .map(|i| Box::new(i as i64) as Box<dyn ToSql + Sync + Send>)
                .collect(),
        }
    }

    #[test]
    fn statements_combine_into_one_with_their_parameters_numbered_on() {
        assert!(combined(&[]).is_none());
        let single = [statement("DELETE FROM t WHERE id = ANY($1::uuid[])", 1)];
        let Some((sql, params)) = combined(&single) else {
            panic!("one statement runs");
        };
        assert_eq!(sql, "DELETE FROM t WHERE id = ANY($1::uuid[])");
        assert_eq!(params.len(), 1);

        let three = [
            statement("INSERT INTO a SELECT * FROM unnest($1::uuid[], $2::text[])", 2),
            statement(
                "INSERT INTO b SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], \
                 $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::int[])",
                10,
            ),
            statement("DELETE FROM c WHERE (x, y) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))", 2),
        ];
        let Some((sql, params)) = combined(&three) else {
            panic!("three statements run");
        };
        assert_eq!(
            sql,
            "WITH w0 AS (INSERT INTO a SELECT * FROM unnest($1::uuid[], $2::text[])), \
             w1 AS (INSERT INTO b SELECT * FROM unnest($3::uuid[], $4::text[], $5::text[], \
             $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::int[])) \
             DELETE FROM c WHERE (x, y) IN (SELECT * FROM unnest($13::uuid[], $14::uuid[]))"
        );
        assert_eq!(params.len(), 14);
    }

    #[test]
    fn holders_told_by_a_commit_are_its_last_statement_once_per_node_and_organization() {
        use crate::domain::delivery::HolderTold;
        use crate::domain::delivery::Job;
        use crate::domain::event::EventKind;
        use crate::ids::OrgId;
        let (org, other) = (OrgId::generate(), OrgId::generate());
        let holder = Uuid::now_v7();
        // A holder of an earlier release: told, not handed jobs.
        let job = |org: OrgId, told: Option<Uuid>| {
            let mut job = Job::new(org, EventKind::TaskCreated, b"{}".to_vec());
            job.holder_told = told.map(|node| HolderTold { node, handed: None });
            Write::PutJob(job)
        };
        let writes = [
            job(org, Some(holder)),
            job(org, Some(holder)),
            job(other, None),
        ];
        let Ok(statements) = super::statements(writes.iter(), None) else {
            panic!("the writes become statements");
        };
        let sqls: Vec<&str> = statements.iter().map(|s| s.sql).collect();
        assert_eq!(sqls, [NewJobs::SQL, Tells::SQL], "the notification last");
        let Some(tells) = statements.last() else {
            panic!("no statement");
        };
        let params: Vec<String> = tells.params.iter().map(|p| format!("{p:?}")).collect();
        assert_eq!(
            params,
            [
                format!("{:?}", [super::own_channel(holder)]),
                format!("{:?}", [org.0.to_string()])
            ],
            "one notification for the two jobs"
        );

        let untold = [job(other, None)];
        let Ok(statements) = super::statements(untold.iter(), None) else {
            panic!("the writes become statements");
        };
        assert_eq!(statements.len(), 1, "no holder told, no notification");
    }

    #[test]
    fn new_jobs_are_handed_to_a_holder_that_takes_them_marked_held_under_its_epoch() {
        use crate::domain::delivery::{HolderTold, Job};
        use crate::domain::event::EventKind;
        let (org, holder) = (OrgId::generate(), Uuid::now_v7());
        let job = |body: &str| {
            let mut job = Job::new(org, EventKind::TaskCreated, body.as_bytes().to_vec());
            job.holder_told = Some(HolderTold {
                node: holder,
                handed: Some(9),
            });
            job
        };
        let (first, second) = (job(r#"{"n":1}"#), job(r#"{"n":2}"#));
        let mut retry = job("{}");
        retry.attempts_made = 1;
        let writes = [
            Write::PutJob(first.clone()),
            Write::PutJob(second.clone()),
            Write::PutJob(retry.clone()),
        ];
        let Ok(statements) = super::statements(writes.iter(), None) else {
            panic!("the writes become statements");
        };
        let sqls: Vec<&str> = statements.iter().map(|s| s.sql).collect();
        assert_eq!(sqls, [NewJobs::SQL, Jobs::SQL, Tells::SQL]);
        let params = |at: usize| -> Vec<String> {
            statements[at]
                .params
                .iter()
                .map(|p| format!("{p:?}"))
                .collect()
        };
        let new_jobs = params(0);
        assert_eq!(new_jobs[7], format!("{:?}", [Some(9i64), Some(9)]), "claim");
        assert_eq!(
            new_jobs[8],
            format!("{:?}", [Some(HANDED), Some(HANDED)]),
            "claim_read"
        );
        assert_eq!(
            params(1)[7],
            format!("{:?}", [None::<i64>]),
            "a retry is told of, not handed"
        );
        let tells = &statements[2].params;
        assert_eq!(
            format!("{:?}", tells[0]),
            format!(
                "{:?}",
                [super::own_channel(holder), super::own_channel(holder)]
            ),
            "one payload for the two new jobs, one notification for the retry"
        );
        let payloads = format!("{:?}", tells[1]);
        let mut expected = Payloads::new(org, 9);
        for job in [&first, &second] {
            let Some(line) = Line::of(job) else {
                panic!("a small job is handed")
            };
            expected.push(&line);
        }
        let expected = expected.finish();
        assert_eq!(
            payloads,
            format!("{:?}", [org.0.to_string(), expected[0].clone()]),
            "the new jobs in commit order"
        );

        // The same job waiting for its retry: an update of its attempts and
        // due time only, with no envelope and no notification.
        retry.due_at = crate::time::Timestamp(retry.due_at.millis() + 2000);
        let Ok(statements) = super::statements([Write::RetryJob(retry.clone())].iter(), None)
        else {
            panic!("the write becomes a statement");
        };
        let sqls: Vec<&str> = statements.iter().map(|s| s.sql).collect();
        assert_eq!(sqls, [Retries::SQL]);
        let params: Vec<String> = statements[0]
            .params
            .iter()
            .map(|p| format!("{p:?}"))
            .collect();
        assert_eq!(
            params,
            [
                format!("{:?}", [org.0]),
                format!("{:?}", [retry.delivery_id.0]),
                format!("{:?}", [1i16]),
                format!("{:?}", [time(retry.due_at)]),
            ]
        );
    }
}
