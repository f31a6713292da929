//! Reads: everything the store answers, as SQL. Pages are newest first by
//! id (ids are time-ordered), one row beyond the page telling whether more
//! remain.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::error::from_pg;
use super::rows;
use super::transact::query;
use super::upkeep::Pass;
use super::PgStore;
use crate::domain::audit::AuditRecord;
use crate::domain::delivery::{Job, LogRecord};
use crate::domain::org_state::OrgState;
use crate::domain::resources::Resource;
use crate::domain::user::{TokenRecord, User};
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, ResourceId, TokenId, UserId};
use crate::storage::sealed::opened;
use crate::storage::{Counts, Loaded, LogFilter, Page, StoreError, UserKey, Window, SCAN_LIMIT};
use crate::time::Timestamp;

fn limit_plus_one(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1
}

/// The first `limit` of `rows` decoded, and whether there were more.
fn page<T>(
    rows: Vec<Row>,
    limit: usize,
    decode: impl Fn(&Row) -> Result<T, StoreError>,
) -> Result<Page<T>, StoreError> {
    let more = rows.len() > limit;
    let items = rows
        .iter()
        .take(limit)
        .map(decode)
        .collect::<Result<_, _>>()?;
    Ok(Page::complete(items, more))
}

impl PgStore {
    /// See [`crate::storage::Store::load`]: secrets opened.
    pub async fn load(&self) -> Result<Loaded, StoreError> {
        let (users, tokens) = (
            format!("SELECT {} FROM users", rows::USER),
            format!("SELECT {} FROM tokens", rows::TOKEN),
        );
        let (states, accounts) = self
            .database
            .with("the start-up load", async |client| {
                let (states, users, tokens) = futures_util::join!(
                    self.org_states(client, None),
                    client.query(users.as_str(), &[]),
                    client.query(tokens.as_str(), &[]),
                );
                Ok((states?, (users.map_err(from_pg)?, tokens.map_err(from_pg)?)))
            })
            .await?;
        let (users, tokens) = accounts;
        Ok(Loaded {
            orgs: states,
            users: users.iter().map(rows::user).collect::<Result<_, _>>()?,
            tokens: tokens.iter().map(rows::token).collect::<Result<_, _>>()?,
        })
    }

    /// See [`crate::storage::Store::user`].
    pub async fn user(&self, by: UserKey<'_>) -> Result<Option<User>, StoreError> {
        let (sql, id, email) = match by {
            UserKey::Id(id) => (
                format!("SELECT {} FROM users WHERE id = $1", rows::USER),
                Some(id.0),
                None,
            ),
            UserKey::Email(folded) => (
                format!("SELECT {} FROM users WHERE email_folded = $1", rows::USER),
                None,
                Some(folded.to_owned()),
            ),
        };
        let found = self
            .database
            .with("a user read", async |client| match (&id, &email) {
                (Some(id), _) => query(client, &sql, &[id]).await,
                (_, Some(email)) => query(client, &sql, &[email]).await,
                _ => Ok(Vec::new()),
            })
            .await?;
        found.first().map(rows::user).transpose()
    }

    /// See [`crate::storage::Store::orgs_of`].
    pub async fn orgs_of(&self, user: UserId) -> Result<Vec<(OrgId, u64)>, StoreError> {
        let found = self
            .database
            .query(
                "a membership read",
                "SELECT o.id, o.revision FROM memberships m \
                     JOIN organizations o ON o.id = m.organization_id \
                     WHERE m.user_id = $1 ORDER BY o.id",
                &[&user.0],
            )
            .await?;
        found
            .iter()
            .map(|row| {
                let revision = rows::get::<i64>(row, "revision")?;
                Ok((
                    OrgId(rows::get(row, "id")?),
                    u64::try_from(revision).unwrap_or_default(),
                ))
            })
            .collect()
    }

    /// See [`crate::storage::Store::token`].
    pub async fn token(&self, id: TokenId) -> Result<Option<TokenRecord>, StoreError> {
        let sql = format!("SELECT {} FROM tokens WHERE id = $1", rows::TOKEN);
        let found = self.database.query("a token read", &sql, &[&id.0]).await?;
        found.first().map(rows::token).transpose()
    }

    /// See [`crate::storage::Store::org_state`]: as stored now, secret opened.
    pub async fn org_state(&self, org: OrgId) -> Result<Option<OrgState>, StoreError> {
        let states = self
            .database
            .with("an organization read", async |client| {
                self.org_states(client, Some(org)).await
            })
            .await?;
        Ok(states.into_iter().next())
    }

    /// Every organization's state, or only `only`'s: four queries sent
    /// together.
    async fn org_states(
        &self,
        client: &ClientWrapper,
        only: Option<OrgId>,
    ) -> Result<Vec<OrgState>, StoreError> {
        let filter = |column: &str| match only {
            Some(_) => format!(" WHERE {column} = $1"),
            None => String::new(),
        };
        let sql = [
            format!(
                "SELECT {}, revision FROM organizations{}",
                rows::ORGANIZATION,
                filter("id")
            ),
            format!(
                "SELECT {} FROM roles{}",
                rows::ROLE,
                filter("organization_id")
            ),
            format!(
                "SELECT {} FROM memberships{}",
                rows::MEMBERSHIP,
                filter("organization_id")
            ),
            format!(
                "SELECT {} FROM webhooks{}",
                rows::WEBHOOK,
                filter("organization_id")
            ),
        ];
        let id = only.map(|org| org.0);
        let params: Vec<&(dyn ToSql + Sync)> = match &id {
            Some(id) => vec![id],
            None => vec![],
        };
        let fetched =
            futures_util::future::join_all(sql.iter().map(|sql| query(client, sql, &params)))
                .await
                .into_iter()
                .collect::<Result<Vec<_>, _>>()?;
        let [orgs, roles, members, webhooks] =
            <[Vec<Row>; 4]>::try_from(fetched).map_err(|_| StoreError::Closed)?;
        let mut by_org: std::collections::HashMap<OrgId, OrgParts> = Default::default();
        for row in &roles {
            let role = rows::role(row)?;
            by_org
                .entry(role.organization_id)
                .or_default()
                .roles
                .push(role);
        }
        for row in &members {
            let member = rows::membership(row)?;
            by_org
                .entry(member.organization_id)
                .or_default()
                .members
                .push(member);
        }
        for row in &webhooks {
            let endpoint = opened(rows::webhook(row)?, self.key.as_ref())?;
            let org = endpoint.organization_id;
            by_org.entry(org).or_default().webhook = Some(endpoint);
        }
        let mut states = Vec::with_capacity(orgs.len());
        for row in &orgs {
            let org = rows::organization(row)?;
            let revision = rows::get::<i64>(row, "revision")?;
            let parts = by_org.remove(&org.id).unwrap_or_default();
            let mut state = OrgState::new(org, parts.roles, parts.members, parts.webhook);
            state.revision = u64::try_from(revision).unwrap_or_default();
            states.push(state);
        }
        Ok(states)
    }

    /// The stored admin-token hash, if any.
    pub async fn admin_token_hash(&self) -> Result<Option<[u8; 32]>, StoreError> {
        let rows = self
            .database
            .query("a read", "SELECT sha256 FROM admin_token", &[])
            .await?;
        match rows.first() {
            Some(row) => {
                let bytes: Vec<u8> = rows::get(row, "sha256")?;
                Ok(<[u8; 32]>::try_from(bytes.as_slice()).ok())
            }
            None => Ok(None),
        }
    }

    /// A workspace resource of `org`.
    pub async fn resource<T: Resource>(
        &self,
        org: OrgId,
        id: ResourceId,
    ) -> Result<Option<T>, StoreError> {
        let rows = self
            .database
            .query(
                "a read",
                "SELECT data::text AS data FROM resources \
                     WHERE organization_id = $1 AND kind = $2 AND id = $3",
                &[&org.0, &T::KIND.name(), &id.0],
            )
            .await?;
        rows.first().map(rows::resource).transpose()
    }

    /// One page of `org`'s resources of kind `T`, newest first.
    pub async fn resource_page<T: Resource>(
        &self,
        org: OrgId,
        before: Option<ResourceId>,
        limit: usize,
        parent: Option<ResourceId>,
    ) -> Result<Page<T>, StoreError> {
        let before = before.map(|b| b.0);
        let (kind, limit_rows) = (T::KIND.name(), limit_plus_one(limit));
        // A statement of its own with the parent, which the index by parent
        // serves: a prepared `($4 IS NULL OR parent_id = $4)` may be planned
        // once for both, without it.
        let rows = match parent {
            None => {
                let sql = "SELECT data::text AS data FROM resources \
                     WHERE organization_id = $1 AND kind = $2 \
                     AND ($3::uuid IS NULL OR id < $3) ORDER BY id DESC LIMIT $4";
                let params: [&(dyn ToSql + Sync); 4] = [&org.0, &kind, &before, &limit_rows];
                self.database.query("a read", sql, &params).await?
            }
            Some(parent) => {
                let sql = "SELECT data::text AS data FROM resources \
                     WHERE organization_id = $1 AND kind = $2 AND parent_id = $3 \
                     AND ($4::uuid IS NULL OR id < $4) ORDER BY id DESC LIMIT $5";
                let params: [&(dyn ToSql + Sync); 5] =
                    [&org.0, &kind, &parent.0, &before, &limit_rows];
                self.database.query("a read", sql, &params).await?
            }
        };
        page(rows, limit, rows::resource)
    }

    /// Every (organization, member) whose role assignment ended by `now`
    /// (at most 1,000: the sweep comes back for the rest).
    pub async fn due_role_expiries(
        &self,
        now: Timestamp,
    ) -> Result<Vec<(OrgId, UserId)>, StoreError> {
        let rows = self
            .background
            .query(
                "a read",
                "SELECT organization_id, user_id FROM memberships \
                 WHERE role_expires_at <= $1 ORDER BY role_expires_at LIMIT 1000",
                &[&rows::time(now)],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    OrgId(row.try_get("organization_id").map_err(StoreError::engine)?),
                    UserId(row.try_get("user_id").map_err(StoreError::engine)?),
                ))
            })
            .collect()
    }

    /// One page of an organization's audit log, newest first.
    pub async fn audit_page(
        &self,
        org: OrgId,
        before: Option<AuditId>,
        limit: usize,
        action: Option<&str>,
    ) -> Result<Page<AuditRecord>, StoreError> {
        let before = before.map(|b| b.0);
        let limit_rows = limit_plus_one(limit);
        // With the action, a statement of its own, which the index by action
        // serves (see `resource_page`).
        let rows = match action {
            None => {
                let sql = format!(
                    "SELECT {} FROM audit_log WHERE organization_id = $1 \
                     AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3",
                    rows::AUDIT
                );
                let params: [&(dyn ToSql + Sync); 3] = [&org.0, &before, &limit_rows];
                self.database.query("a read", &sql, &params).await?
            }
            Some(action) => {
                let sql = format!(
                    "SELECT {} FROM audit_log WHERE organization_id = $1 AND action = $2 \
                     AND ($3::uuid IS NULL OR id < $3) ORDER BY id DESC LIMIT $4",
                    rows::AUDIT
                );
                let params: [&(dyn ToSql + Sync); 4] = [&org.0, &action, &before, &limit_rows];
                self.database.query("a read", &sql, &params).await?
            }
        };
        page(rows, limit, rows::audit)
    }

    /// One page of an organization's delivery log, newest first. With a
    /// filter, at most [`SCAN_LIMIT`] records are examined (see
    /// [`Page::scanned_to`]): no index serves the filters, and one would
    /// cost every delivery a write.
    pub async fn delivery_log_page(
        &self,
        org: OrgId,
        before: Option<LogId>,
        limit: usize,
        filter: LogFilter<'_>,
    ) -> Result<Page<LogRecord>, StoreError> {
        let before = before.map(|b| b.0);
        let outcome = filter.outcome.map(|o| rows::name_of(&o)).transpose()?;
        if filter.event.is_none() && outcome.is_none() {
            let sql = format!(
                "SELECT {} FROM delivery_log WHERE organization_id = $1 \
                 AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3",
                rows::LOG
            );
            let params: [&(dyn ToSql + Sync); 3] = [&org.0, &before, &limit_plus_one(limit)];
            let rows = self.database.query("a read", &sql, &params).await?;
            return page(rows, limit, rows::log);
        }
        // The ids examined (newest first, at most `bound`, and one more to
        // tell whether others follow), then the records among them that
        // pass, in one statement; a page with no record still answers one
        // row, for where the examination ended.
        let bound = SCAN_LIMIT.max(limit + 1);
        let sql = format!(
            "WITH ids AS (SELECT id FROM delivery_log WHERE organization_id = $1 \
                AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3::int8 + 1), \
             scanned AS (SELECT (SELECT count(*) FROM ids) AS examined, \
                (SELECT id FROM ids ORDER BY id DESC \
                  OFFSET greatest(least((SELECT count(*) FROM ids), $3::int8), 1) - 1 LIMIT 1) AS last_id) \
             SELECT page.*, scanned.last_id, scanned.examined FROM scanned \
             LEFT JOIN LATERAL \
               (SELECT {} FROM delivery_log WHERE organization_id = $1 AND id >= scanned.last_id \
                AND ($2::uuid IS NULL OR id < $2) AND ($4::text IS NULL OR event = $4) \
                AND ($5::text IS NULL OR outcome = $5) ORDER BY id DESC LIMIT $6) page ON true \
             ORDER BY page.id DESC",
            rows::LOG
        );
        let bound_param = i64::try_from(bound).unwrap_or(i64::MAX);
        let params: [&(dyn ToSql + Sync); 6] = [
            &org.0,
            &before,
            &bound_param,
            &filter.event,
            &outcome,
            &limit_plus_one(limit),
        ];
        let rows = self.database.query("a read", &sql, &params).await?;
        let mut examined = (0i64, None::<uuid::Uuid>);
        let mut matched = Vec::with_capacity(rows.len());
        for row in rows {
            examined = (
                row.try_get("examined").map_err(StoreError::engine)?,
                row.try_get("last_id").map_err(StoreError::engine)?,
            );
            if row
                .try_get::<_, Option<uuid::Uuid>>("id")
                .map_err(StoreError::engine)?
                .is_some()
            {
                matched.push(row);
            }
        }
        let mut found = page(matched, limit, rows::log)?;
        // One more than the bound was looked at: records remain past the
        // last one examined.
        if !found.more && examined.0 > bound_param {
            found.scanned_to = examined.1.map(|id| *id.as_bytes());
        }
        Ok(found)
    }

    /// The newest delivery-log record of `delivery` in `org`: one probe of
    /// the index by delivery.
    pub async fn find_delivery(
        &self,
        org: OrgId,
        delivery: DeliveryId,
    ) -> Result<Option<LogRecord>, StoreError> {
        let sql = format!(
            "SELECT {} FROM delivery_log WHERE organization_id = $1 AND delivery_id = $2 \
             ORDER BY id DESC LIMIT 1",
            rows::LOG
        );
        let rows = self
            .database
            .query("a read", &sql, &[&org.0, &delivery.0])
            .await?;
        rows.first().map(rows::log).transpose()
    }

    /// Up to `limit` of `org`'s jobs after `after`, oldest first.
    pub async fn outbox_after(
        &self,
        org: OrgId,
        after: Option<DeliveryId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let after = after.map(|a| a.0);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT {} FROM outbox WHERE organization_id = $1 \
             AND ($2::uuid IS NULL OR delivery_id > $2) ORDER BY delivery_id LIMIT $3",
            rows::JOB
        );
        let rows = self
            .background
            .query("a read", &sql, &[&org.0, &after, &limit])
            .await?;
        rows.iter().map(rows::job).collect()
    }

    /// Each organization's first `limit` jobs and whether more wait: the
    /// organizations found by skipping through the primary key, one index
    /// probe each, however long their queues.
    pub async fn outbox_windows(&self, limit: usize) -> Result<Vec<Window>, StoreError> {
        let sql = format!(
            "WITH RECURSIVE orgs(id) AS ( \
               (SELECT organization_id FROM outbox ORDER BY organization_id LIMIT 1) \
               UNION ALL \
               SELECT (SELECT organization_id FROM outbox WHERE organization_id > orgs.id \
                       ORDER BY organization_id LIMIT 1) FROM orgs WHERE orgs.id IS NOT NULL) \
             SELECT j.* FROM orgs CROSS JOIN LATERAL ( \
               SELECT {} FROM outbox WHERE organization_id = orgs.id \
               ORDER BY delivery_id LIMIT $1) j \
             WHERE orgs.id IS NOT NULL ORDER BY j.organization_id, j.delivery_id",
            rows::JOB
        );
        let rows = self
            .background
            .query("the outbox windows", &sql, &[&limit_plus_one(limit)])
            .await?;
        let mut windows: Vec<Window> = Vec::new();
        for row in &rows {
            let job = rows::job(row)?;
            match windows.last_mut() {
                Some(window) if window.org == job.organization_id => {
                    if window.jobs.len() == limit {
                        window.more = true;
                    } else {
                        window.jobs.push(job);
                    }
                }
                _ => windows.push(Window {
                    org: job.organization_id,
                    jobs: vec![job],
                    more: false,
                }),
            }
        }
        Ok(windows)
    }

    /// See [`crate::storage::Store::counts`].
    pub async fn counts(&self) -> Result<Counts, StoreError> {
        self.background
            .with("a count", async |client| counts(client).await)
            .await
    }

    /// Unfinished deliveries in the outbox.
    pub async fn outbox_len(&self) -> Result<usize, StoreError> {
        let rows = self
            .background
            .query("a read", "SELECT count(*) AS n FROM outbox", &[])
            .await?;
        count(rows.first())
    }

    /// The database's size on disk, in bytes.
    pub async fn size_on_disk(&self) -> Result<u64, StoreError> {
        let rows = self
            .background
            .query(
                "a read",
                "SELECT pg_database_size(current_database()) AS n",
                &[],
            )
            .await?;
        count(rows.first()).map(|n| n as u64)
    }

    /// Deletes all but the newest `keep` delivery-log records of `org`;
    /// returns how many remain. Batched with the other organizations'
    /// passes asked for meanwhile (see [`super::upkeep`]).
    pub async fn prune_delivery_log(&self, org: OrgId, keep: usize) -> Result<usize, StoreError> {
        self.upkeep.run(org, Pass::Keep(keep)).await
    }

    /// Deletes the `count` oldest delivery-log records of `org`; returns
    /// how many it deleted (batched likewise).
    pub async fn trim_delivery_log(&self, org: OrgId, count: usize) -> Result<usize, StoreError> {
        self.upkeep.run(org, Pass::Trim(count)).await
    }

    /// Which of `records` (organization, record id) the delivery log holds
    /// already: a write of outcomes whose answer was lost may have landed,
    /// and is written again without them.
    pub async fn logged_already(
        &self,
        records: &[(OrgId, LogId)],
    ) -> Result<Vec<(OrgId, LogId)>, StoreError> {
        const SQL: &str = "SELECT organization_id, id FROM delivery_log \
             WHERE (organization_id, id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))";
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let (orgs, ids): (Vec<uuid::Uuid>, Vec<uuid::Uuid>) =
            records.iter().map(|(org, id)| (org.0, id.0)).unzip();
        let rows = self
            .background
            .query("a check of outcomes written", SQL, &[&orgs, &ids])
            .await?;
        rows.iter()
            .map(|row| {
                let org = row.try_get("organization_id").map(OrgId);
                let id = row.try_get("id").map(LogId);
                org.and_then(|org| id.map(|id| (org, id)))
            })
            .collect::<Result<_, _>>()
            .map_err(StoreError::codec)
    }

    /// Whether the database takes writes now (`GET /readyz`).
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.database
            .with("the readiness probe", async |client| {
                client.batch_execute("SELECT 1").await.map_err(from_pg)
            })
            .await
    }
}

#[derive(Default)]
struct OrgParts {
    roles: Vec<crate::domain::role::Role>,
    members: Vec<crate::domain::member::Membership>,
    webhook: Option<crate::domain::webhook::WebhookEndpoint>,
}

/// How many rows each table holds, in one statement.
pub async fn counts(client: &ClientWrapper) -> Result<Counts, StoreError> {
    const SQL: &str = "SELECT (SELECT count(*) FROM users) AS users, \
         (SELECT count(*) FROM tokens) AS tokens, \
         (SELECT count(*) FROM organizations) AS organizations, \
         (SELECT count(*) FROM roles) AS roles, \
         (SELECT count(*) FROM memberships) AS memberships, \
         (SELECT count(*) FROM webhooks) AS webhooks, \
         (SELECT count(*) FROM audit_log) AS audit_log, \
         (SELECT count(*) FROM resources) AS resources, \
         (SELECT count(*) FROM outbox) AS outbox, \
         (SELECT count(*) FROM delivery_log) AS delivery_log, \
         (SELECT count(*) FROM admin_token) AS admin_token";
    let rows = query(client, SQL, &[]).await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Engine("the count answered no row".into()))?;
    let get = |column: &str| rows::get::<i64>(row, column).map(|n| n.max(0) as u64);
    Ok(Counts {
        users: get("users")?,
        tokens: get("tokens")?,
        organizations: get("organizations")?,
        roles: get("roles")?,
        memberships: get("memberships")?,
        webhooks: get("webhooks")?,
        audit_records: get("audit_log")?,
        resources: get("resources")?,
        deliveries: get("outbox")?,
        log_records: get("delivery_log")?,
        admin_tokens: get("admin_token")?,
    })
}

fn count(row: Option<&Row>) -> Result<usize, StoreError> {
    match row {
        Some(row) => rows::get::<i64>(row, "n").map(|n| n.max(0) as usize),
        None => Ok(0),
    }
}
