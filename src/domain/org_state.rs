//! The immutable snapshot of one organization that request handlers read:
//! the organization, its roles, its memberships and derived counts.
//!
//! Only the organization's actor makes new snapshots, by applying [`Edit`]s
//! to a copy; readers hold an `Arc` and never wait.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::domain::member::{Membership, MembershipView};
use crate::domain::memo::Memo;
use crate::domain::names::fold;
use crate::domain::organization::Organization;
use crate::domain::permissions::PermissionSet;
use crate::domain::role::{Role, RoleView};
use crate::domain::webhook::WebhookEndpoint;
use crate::ids::{OrgId, RoleId, UserId};
use crate::time::Timestamp;

/// One change to an organization's state; the same value drives the storage
/// write and the in-memory update, so the two cannot disagree.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    /// Insert or replace the organization record.
    PutOrg(Organization),
    /// Insert or replace a role.
    PutRole(Role),
    /// Remove a role.
    DeleteRole(OrgId, RoleId),
    /// Insert or replace a membership.
    PutMember(Membership),
    /// Remove a membership.
    DeleteMember(OrgId, UserId),
    /// Save (or replace) the webhook endpoint.
    PutWebhook(WebhookEndpoint),
    /// Remove the webhook endpoint.
    DeleteWebhook(OrgId),
}

/// A consistent view of one organization.
#[derive(Clone, Debug)]
pub struct OrgState {
    /// The organization record.
    pub org: Organization,
    /// Every role, by id.
    pub roles: BTreeMap<RoleId, Arc<Role>>,
    /// Every membership, by user.
    pub members: BTreeMap<UserId, Arc<Membership>>,
    /// The webhook endpoint, if configured.
    pub webhook: Option<Arc<WebhookEndpoint>>,
    /// How many changes it has seen: one more with each [`OrgState::apply`].
    /// Stored by a database that several nodes share, so that a node can
    /// tell its snapshot is behind; counted from the start elsewhere.
    pub revision: u64,
    /// Members per role, kept in step with `members`.
    member_counts: HashMap<RoleId, usize>,
    /// The whole role list as JSON (`GET /roles` without paging), rendered
    /// by the first read of this snapshot: every later read answers these
    /// bytes instead of building and serializing the views again.
    pub role_list_json: Memo<Option<Vec<u8>>>,
}

impl OrgState {
    /// Builds a snapshot from stored rows.
    pub fn new(
        org: Organization,
        roles: Vec<Role>,
        members: Vec<Membership>,
        webhook: Option<WebhookEndpoint>,
    ) -> Self {
        let mut state = OrgState {
            org,
            webhook: webhook.map(Arc::new),
            revision: 0,
            roles: roles.into_iter().map(|r| (r.id, Arc::new(r))).collect(),
            members: BTreeMap::new(),
            member_counts: HashMap::new(),
            role_list_json: Memo::new(),
        };
        for member in members {
            *state.member_counts.entry(member.role_id).or_default() += 1;
            state.members.insert(member.user_id, Arc::new(member));
        }
        state
    }

    /// The organization's id.
    pub fn id(&self) -> OrgId {
        self.org.id
    }

    /// The keys a role grants: Owner always holds the whole catalog.
    pub fn role_permissions(role: &Role) -> PermissionSet {
        if role.is_immutable {
            PermissionSet::ALL
        } else {
            role.permissions
        }
    }

    /// The caller's effective permissions, or `None` when not a member.
    /// An expired role assignment counts as Member from its very instant,
    /// before the fall-back is recorded.
    #[inline]
    pub fn permissions_of(&self, user: UserId) -> Option<PermissionSet> {
        let member = self.members.get(&user)?;
        self.roles
            .get(&self.role_in_force(member))
            .map(|role| Self::role_permissions(role))
    }

    /// The role `member` holds now: Member once their assignment expired.
    #[inline]
    pub fn role_in_force(&self, member: &Membership) -> RoleId {
        match member.role_expires_at {
            Some(at) if at <= Timestamp::now() => {
                self.fallback_role(member).map_or(member.role_id, |r| r.id)
            }
            _ => member.role_id,
        }
    }

    /// The role an expired assignment of `member` falls back to: Member;
    /// none for Owner, which never expires (an expiry left there by an
    /// earlier build, which did not know them, is ignored).
    fn fallback_role(&self, member: &Membership) -> Option<&Arc<Role>> {
        let holds_owner = self
            .roles
            .get(&member.role_id)
            .is_some_and(|r| r.is_immutable);
        if holds_owner {
            return None;
        }
        self.member_role()
    }

    /// `member` as it stands once its expired assignment fell back to the
    /// Member role; `None` while the assignment runs (or never ends).
    pub fn fallen_back(&self, member: &Membership, now: Timestamp) -> Option<Membership> {
        let at = member.role_expires_at.filter(|at| *at <= now)?;
        let fallback = self.fallback_role(member)?;
        Some(Membership {
            role_id: fallback.id,
            role_expires_at: None,
            updated_at: at,
            ..member.clone()
        })
    }

    /// The built-in Member role, which expired assignments fall back to.
    pub fn member_role(&self) -> Option<&Arc<Role>> {
        self.roles.values().find(|r| r.is_system && !r.is_immutable)
    }

    /// The members whose assignment has expired by `now` but still stands
    /// as stored: fall-backs to record before anything else changes them.
    pub fn due_fallbacks(&self, now: Timestamp) -> Vec<UserId> {
        self.members
            .values()
            .filter(|m| self.fallen_back(m, now).is_some())
            .map(|m| m.user_id)
            .collect()
    }

    /// The Owner role.
    pub fn owner_role(&self) -> Option<&Arc<Role>> {
        self.roles.values().find(|r| r.is_immutable)
    }

    /// How many members hold `role`.
    pub fn member_count(&self, role: RoleId) -> usize {
        self.member_counts.get(&role).copied().unwrap_or(0)
    }

    /// How many members hold the Owner role.
    pub fn owner_count(&self) -> usize {
        self.owner_role()
            .map(|r| self.member_count(r.id))
            .unwrap_or(0)
    }

    /// The REST representation of a role.
    pub fn role_view(&self, role: &Role) -> RoleView {
        role.view(self.member_count(role.id))
    }

    /// The REST representation of a membership, as it stands now (an
    /// expired assignment shows as Member).
    pub fn member_view(&self, member: &Membership) -> MembershipView {
        let fallen = self.fallen_back(member, Timestamp::now());
        let member = fallen.as_ref().unwrap_or(member);
        let role_name = self
            .roles
            .get(&member.role_id)
            .map(|r| r.name.as_str())
            .unwrap_or("");
        member.view(role_name)
    }

    /// The role whose folded name equals `folded`, if any.
    pub fn role_named(&self, folded: &str) -> Option<&Arc<Role>> {
        self.roles.values().find(|r| fold(&r.name) == folded)
    }

    /// Roles in list order: Owner, Member, then custom roles by folded name.
    /// Each comes with its paging key.
    pub fn roles_in_list_order(&self) -> Vec<(Vec<u8>, &Arc<Role>)> {
        let mut roles: Vec<(Vec<u8>, &Arc<Role>)> = self
            .roles
            .values()
            .map(|role| {
                let rank = match (role.is_immutable, role.is_system) {
                    (true, _) => 0u8,
                    (false, true) => 1,
                    _ => 2,
                };
                let mut key = vec![rank];
                if rank == 2 {
                    key.extend_from_slice(fold(&role.name).as_bytes());
                }
                key.push(0);
                key.extend_from_slice(role.id.as_bytes());
                (key, role)
            })
            .collect();
        roles.sort_by(|a, b| a.0.cmp(&b.0));
        roles
    }

    /// A copy of this state with `edits` applied.
    pub fn apply(&self, edits: &[Edit]) -> OrgState {
        let mut next = self.clone();
        next.revision += 1;
        for edit in edits {
            match edit {
                Edit::PutOrg(org) => next.org = org.clone(),
                Edit::PutRole(role) => {
                    next.roles.insert(role.id, Arc::new(role.clone()));
                }
                Edit::DeleteRole(_, id) => {
                    next.roles.remove(id);
                    next.member_counts.remove(id);
                }
                Edit::PutMember(member) => {
                    if let Some(old) = next
                        .members
                        .insert(member.user_id, Arc::new(member.clone()))
                    {
                        next.decrement(old.role_id);
                    }
                    *next.member_counts.entry(member.role_id).or_default() += 1;
                }
                Edit::DeleteMember(_, user) => {
                    if let Some(old) = next.members.remove(user) {
                        next.decrement(old.role_id);
                    }
                }
                Edit::PutWebhook(endpoint) => next.webhook = Some(Arc::new(endpoint.clone())),
                Edit::DeleteWebhook(_) => next.webhook = None,
            }
        }
        next
    }

    fn decrement(&mut self, role: RoleId) {
        if let Some(count) = self.member_counts.get_mut(&role) {
            *count = count.saturating_sub(1);
        }
    }
}
