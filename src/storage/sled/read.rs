//! Reads: everything the store answers, from the database in service.

use super::codec::{decode, decode_head};
use super::engine::Engine;
use super::keys::{self, TreeName};
use crate::domain::audit::AuditRecord;
use crate::domain::delivery::Outcome;
use crate::domain::delivery::{Job, LogRecord};
use crate::domain::member::Membership;
use crate::domain::org_state::OrgState;
use crate::domain::organization::Organization;
use crate::domain::resources::Resource;
use crate::domain::role::Role;
use crate::domain::user::{TokenRecord, User};
use crate::domain::webhook::WebhookEndpoint;
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, ResourceId, UserId};
use crate::secrets::SealingKey;
use crate::storage::sealed::opened;
use crate::storage::{Counts, Loaded, LogFilter, Page, StoreError, SCAN_LIMIT};
use crate::time::Timestamp;

/// A key too short for the ids it holds.
#[derive(Debug, thiserror::Error)]
#[error("a stored key is too short for the ids it holds")]
struct BadKey;

/// The leading fields of a stored [`LogRecord`], in order: what its filters
/// look at, without decoding its envelope.
type LogHead = (LogId, OrgId, DeliveryId, String, Option<u8>, Outcome);

impl Engine {
    /// The stored admin-token hash, if any.
    pub fn admin_token_hash(&self) -> Result<Option<[u8; 32]>, StoreError> {
        let value = self
            .tree(TreeName::Meta)
            .get(keys::ADMIN_TOKEN_SHA256)
            .map_err(StoreError::engine)?;
        Ok(value.and_then(|v| <[u8; 32]>::try_from(v.as_ref()).ok()))
    }

    /// How many records of each kind are stored: the keys of each tree
    /// (the index trees repeat the keys of their tables).
    pub fn counts(&self) -> Result<Counts, StoreError> {
        let len = |tree| self.tree(tree).len() as u64;
        Ok(Counts {
            users: len(TreeName::Users),
            tokens: len(TreeName::Tokens),
            organizations: len(TreeName::Orgs),
            roles: len(TreeName::Roles),
            memberships: len(TreeName::Members),
            webhooks: len(TreeName::Webhooks),
            audit_records: len(TreeName::Audit),
            resources: len(TreeName::Resources),
            deliveries: len(TreeName::Outbox) + super::spill::queued(self)?,
            log_records: len(TreeName::DeliveryLog),
            admin_tokens: u64::from(self.admin_token_hash()?.is_some()),
        })
    }

    /// Reads everything the in-memory state is built from.
    pub fn load(&self, key: Option<&SealingKey>) -> Result<Loaded, StoreError> {
        let users = self.values::<User>(TreeName::Users)?;
        let tokens = self.values::<TokenRecord>(TreeName::Tokens)?;
        let orgs = self
            .values::<Organization>(TreeName::Orgs)?
            .into_iter()
            .map(|org| self.state_of(org, key))
            .collect::<Result<_, _>>()?;
        Ok(Loaded {
            orgs,
            users,
            tokens,
        })
    }

    /// One organization's state, as stored.
    pub fn org_state(
        &self,
        org: OrgId,
        key: Option<&SealingKey>,
    ) -> Result<Option<OrgState>, StoreError> {
        match self
            .tree(TreeName::Orgs)
            .get(org.as_bytes())
            .map_err(StoreError::engine)?
        {
            Some(bytes) => self.state_of(decode(&bytes)?, key).map(Some),
            None => Ok(None),
        }
    }

    /// `org` with its roles, members and webhook (secret opened).
    fn state_of(
        &self,
        org: Organization,
        key: Option<&SealingKey>,
    ) -> Result<OrgState, StoreError> {
        let prefix = org.id.as_bytes().to_vec();
        let roles = self.prefixed::<Role>(TreeName::Roles, &prefix)?;
        let mut members = self.prefixed::<Membership>(TreeName::Members, &prefix)?;
        self.add_role_expiries(&prefix, &mut members)?;
        let webhook = match self
            .tree(TreeName::Webhooks)
            .get(&prefix)
            .map_err(StoreError::engine)?
        {
            Some(bytes) => Some(opened(decode::<WebhookEndpoint>(&bytes)?, key)?),
            None => None,
        };
        Ok(OrgState::new(org, roles, members, webhook))
    }

    /// A workspace resource of `org`.
    pub fn resource<T: Resource>(
        &self,
        org: OrgId,
        id: ResourceId,
    ) -> Result<Option<T>, StoreError> {
        let key = keys::resource(org, T::KIND, id);
        match self
            .tree(TreeName::Resources)
            .get(key)
            .map_err(StoreError::engine)?
        {
            Some(bytes) => decode(&bytes).map(Some),
            None => Ok(None),
        }
    }

    /// One page of `org`'s resources of kind `T`, newest first.
    pub fn resource_page<T: Resource>(
        &self,
        org: OrgId,
        before: Option<ResourceId>,
        limit: usize,
        parent: Option<ResourceId>,
    ) -> Result<Page<T>, StoreError> {
        let prefix = keys::resource_prefix(org, T::KIND);
        let before = before.map(|id| keys::resource(org, T::KIND, id));
        self.newest_first(
            TreeName::Resources,
            &prefix,
            before.as_ref().map(|k| k.as_slice()),
            limit,
            |bytes| {
                let value: T = decode(bytes)?;
                Ok((parent.is_none() || value.parent() == parent).then_some(value))
            },
        )
    }

    /// One page of an organization's audit log, newest first.
    pub fn audit_page(
        &self,
        org: OrgId,
        before: Option<AuditId>,
        limit: usize,
        action: Option<&str>,
    ) -> Result<Page<AuditRecord>, StoreError> {
        let before = before.map(|id| keys::audit(org, id));
        self.newest_first(
            TreeName::Audit,
            org.as_bytes(),
            before.as_ref().map(|k| k.as_slice()),
            limit,
            |bytes| {
                if let Some(action) = action {
                    let (_, _, _, stored): (AuditId, OrgId, Option<UserId>, String) =
                        decode_head(bytes)?;
                    if stored != action {
                        return Ok(None);
                    }
                }
                decode(bytes).map(Some)
            },
        )
    }

    /// One page of an organization's delivery log, newest first.
    pub fn delivery_log_page(
        &self,
        org: OrgId,
        before: Option<LogId>,
        limit: usize,
        filter: LogFilter<'_>,
    ) -> Result<Page<LogRecord>, StoreError> {
        let before = before.map(|id| keys::delivery_log(org, id));
        self.newest_first(
            TreeName::DeliveryLog,
            org.as_bytes(),
            before.as_ref().map(|k| k.as_slice()),
            limit,
            |bytes| {
                if filter.event.is_none() && filter.outcome.is_none() {
                    return decode(bytes).map(Some);
                }
                let (_, _, _, event, _, outcome): LogHead = decode_head(bytes)?;
                let admitted = filter.event.is_none_or(|e| event == e)
                    && filter.outcome.is_none_or(|o| outcome == o);
                if admitted {
                    decode(bytes).map(Some)
                } else {
                    Ok(None)
                }
            },
        )
    }

    /// A delivery-log record of `delivery` in `org` (each carries its
    /// envelope): one of its entries in [`TreeName::DeliveryIds`], else the
    /// first of its records among the [`SCAN_LIMIT`] made from the instant
    /// it was queued on (records made that soon get no entry: see
    /// `sled::late`).
    pub fn find_delivery(
        &self,
        org: OrgId,
        delivery: DeliveryId,
    ) -> Result<Option<LogRecord>, StoreError> {
        let entries = self.tree(TreeName::DeliveryIds);
        let log = self.tree(TreeName::DeliveryLog);
        for entry in entries
            .scan_prefix(keys::delivery_ids(org, delivery))
            .keys()
            .rev()
        {
            let entry = entry.map_err(StoreError::engine)?;
            let Some(id) = entry.get(32..).and_then(LogId::from_slice) else {
                return Err(StoreError::codec(BadKey));
            };
            // An entry whose record was pruned meanwhile: an older one may remain.
            if let Some(bytes) = log
                .get(keys::delivery_log(org, id))
                .map_err(StoreError::engine)?
            {
                return decode(&bytes).map(Some);
            }
        }
        let queued = keys::delivery_log(org, LogId::first_at(delivery.unix_ms()));
        let after = log.range(queued.as_slice()..keys::past_org(org).as_slice());
        for record in after.values().take(SCAN_LIMIT) {
            let bytes = record.map_err(StoreError::engine)?;
            let (_, _, of): (LogId, OrgId, DeliveryId) = decode_head(&bytes)?;
            if of == delivery {
                return decode(&bytes).map(Some);
            }
        }
        Ok(None)
    }

    /// Up to `limit` of `org`'s jobs in the outbox tree after `after` and
    /// before `until`, oldest first.
    pub fn outbox_after(
        &self,
        org: OrgId,
        after: Option<DeliveryId>,
        until: Option<DeliveryId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let start = match after {
            Some(id) => keys::job_after(org, id),
            None => org.as_bytes().to_vec(),
        };
        let end = match until {
            Some(id) => keys::job(org, id).to_vec(),
            None => keys::past_org(org),
        };
        self.tree(TreeName::Outbox)
            .range(start..end)
            .values()
            .take(limit)
            .map(|v| decode(&v.map_err(StoreError::engine)?))
            .collect()
    }

    /// The organizations with jobs in the outbox tree: one read per
    /// organization, skipping to the next by key.
    pub fn outbox_orgs(&self) -> Result<Vec<OrgId>, StoreError> {
        let outbox = self.tree(TreeName::Outbox);
        let mut orgs = Vec::new();
        let mut from = Vec::new();
        while let Some(entry) = outbox.range(from.as_slice()..).next() {
            let (key, _) = entry.map_err(StoreError::engine)?;
            let Some(org) = key.get(..16).and_then(OrgId::from_slice) else {
                return Err(StoreError::codec(BadKey));
            };
            orgs.push(org);
            from = keys::past_org(org);
        }
        Ok(orgs)
    }

    /// Up to `limit` records of `org` in `tree` that `admit` lets through
    /// (decoded), newest first, strictly before the key `before`; whether
    /// more remain; and, when [`SCAN_LIMIT`] records (or `limit`, if more)
    /// were examined before the page filled, the id of the last one (see
    /// [`Page::scanned_to`]).
    /// Every key ends with its record's 16-byte id.
    fn newest_first<T>(
        &self,
        tree: TreeName,
        prefix: &[u8],
        before: Option<&[u8]>,
        limit: usize,
        admit: impl Fn(&[u8]) -> Result<Option<T>, StoreError>,
    ) -> Result<Page<T>, StoreError> {
        let start = prefix.to_vec();
        let end = match before {
            Some(key) => key.to_vec(),
            None => {
                let mut end = prefix.to_vec();
                end.extend_from_slice(&[0xff; 17]);
                end
            }
        };
        // A page that every record passes fills (and looks one past) first.
        let bound = SCAN_LIMIT.max(limit + 1);
        let mut items = Vec::new();
        let mut examined: Option<::sled::IVec> = None;
        for (count, entry) in self.tree(tree).range(start..end).rev().enumerate() {
            let (key, value) = entry.map_err(StoreError::engine)?;
            if count == bound {
                let scanned_to = examined
                    .as_deref()
                    .and_then(|k| k.len().checked_sub(16).map(|at| &k[at..]))
                    .and_then(|id| <[u8; 16]>::try_from(id).ok());
                return Ok(Page {
                    items,
                    more: false,
                    scanned_to,
                });
            }
            examined = Some(key);
            let Some(record) = admit(&value)? else {
                continue;
            };
            if items.len() == limit {
                return Ok(Page::complete(items, true));
            }
            items.push(record);
        }
        Ok(Page::complete(items, false))
    }

    fn values<T: serde::de::DeserializeOwned>(&self, tree: TreeName) -> Result<Vec<T>, StoreError> {
        self.tree(tree)
            .iter()
            .values()
            .map(|v| decode(&v.map_err(StoreError::engine)?))
            .collect()
    }

    /// Sets the `role_expires_at` of `members` (of the organization
    /// `prefix`) from their tree; few members have one.
    fn add_role_expiries(
        &self,
        prefix: &[u8],
        members: &mut [Membership],
    ) -> Result<(), StoreError> {
        for entry in self.tree(TreeName::MemberExpiries).scan_prefix(prefix) {
            let (key, value) = entry.map_err(StoreError::engine)?;
            let at: Timestamp = decode(&value)?;
            let user = key.get(16..).and_then(UserId::from_slice);
            if let Some(member) = members.iter_mut().find(|m| Some(m.user_id) == user) {
                member.role_expires_at = Some(at);
            }
        }
        Ok(())
    }

    /// Every (organization, member) whose role assignment ended by `now`.
    pub fn due_role_expiries(&self, now: Timestamp) -> Result<Vec<(OrgId, UserId)>, StoreError> {
        let mut due = Vec::new();
        for entry in self.tree(TreeName::MemberExpiries).iter() {
            let (key, value) = entry.map_err(StoreError::engine)?;
            let at: Timestamp = decode(&value)?;
            if at > now {
                continue;
            }
            let org = key.get(..16).and_then(OrgId::from_slice);
            let user = key.get(16..).and_then(UserId::from_slice);
            due.extend(org.zip(user));
        }
        Ok(due)
    }

    fn prefixed<T: serde::de::DeserializeOwned>(
        &self,
        tree: TreeName,
        prefix: &[u8],
    ) -> Result<Vec<T>, StoreError> {
        self.tree(tree)
            .scan_prefix(prefix)
            .values()
            .map(|v| decode(&v.map_err(StoreError::engine)?))
            .collect()
    }
}
