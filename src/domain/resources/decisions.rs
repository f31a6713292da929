//! Decisions (seed 3.1, CONTRACT §7).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::permissions::Permission;
use crate::domain::resources::fields::{self, LINKS_MAX, URL_MAX};
use crate::domain::resources::{Resource, ResourceKind};
use crate::ids::{OrgId, ResourceId, UserId};
use crate::time::Timestamp;

/// A decision's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum DecisionStatus {
    /// Being written.
    Draft,
    /// Proposed, awaiting a verdict.
    Pending,
    /// In force.
    Accepted,
    /// Turned down.
    Rejected,
    /// No longer in force.
    Deprecated,
}

impl DecisionStatus {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            DecisionStatus::Draft => "DRAFT",
            DecisionStatus::Pending => "PENDING",
            DecisionStatus::Accepted => "ACCEPTED",
            DecisionStatus::Rejected => "REJECTED",
            DecisionStatus::Deprecated => "DEPRECATED",
        }
    }
}

/// A decision; also its REST representation and its events' `data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Decision {
    /// Id.
    pub id: ResourceId,
    /// Owner.
    pub organization_id: OrgId,
    /// 1..=200 characters.
    pub title: String,
    /// What was decided (at most 64 KiB).
    pub statement: String,
    /// Why (at most 64 KiB).
    pub rationale: String,
    /// Up to 20 tags of up to 50 characters.
    pub tags: Vec<String>,
    /// Up to 20 URLs or ids of related items.
    pub links: Vec<String>,
    /// Status.
    pub status: DecisionStatus,
    /// Who created it.
    pub created_by: UserId,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl Resource for Decision {
    const KIND: ResourceKind = ResourceKind::Decision;
    const NAME: &'static str = "decision";
    fn id(&self) -> ResourceId {
        self.id
    }
    fn touch(&mut self, now: Timestamp) {
        self.updated_at = now;
    }
}

/// Body of `POST …/decisions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateDecision {
    title: String,
    #[serde(default, deserialize_with = "non_null")]
    statement: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    rationale: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    links: Option<Vec<String>>,
    /// `DRAFT` (default) or `PENDING`.
    #[serde(default, deserialize_with = "non_null")]
    status: Option<DecisionStatus>,
}

/// Body of `PATCH …/decisions/{id}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateDecision {
    #[serde(default, deserialize_with = "non_null")]
    title: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    statement: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    rationale: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    links: Option<Vec<String>>,
}

/// Body of `POST …/decisions/{id}/status`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeStatus {
    /// The target status.
    pub status: DecisionStatus,
}

fn links(items: &[String]) -> Result<Vec<String>, ApiError> {
    fields::list("links", items, LINKS_MAX, URL_MAX)
}

impl CreateDecision {
    /// A validated new decision.
    pub fn build(self, org: OrgId, author: UserId) -> Result<Decision, ApiError> {
        let status = self.status.unwrap_or(DecisionStatus::Draft);
        if !matches!(status, DecisionStatus::Draft | DecisionStatus::Pending) {
            return Err(ApiError::invalid(
                "status",
                "a new decision is DRAFT or PENDING",
            ));
        }
        let now = Timestamp::now();
        Ok(Decision {
            id: ResourceId::generate(),
            organization_id: org,
            title: fields::title("title", &self.title)?,
            statement: fields::body("statement", self.statement.as_deref().unwrap_or(""))?,
            rationale: fields::body("rationale", self.rationale.as_deref().unwrap_or(""))?,
            tags: fields::tags(self.tags.as_deref().unwrap_or_default())?,
            links: links(self.links.as_deref().unwrap_or_default())?,
            status,
            created_by: author,
            created_at: now,
            updated_at: now,
        })
    }
}

impl UpdateDecision {
    /// Validates the patch; returns a function applying it.
    pub fn validate(self) -> Result<impl Fn(&Decision) -> Decision, ApiError> {
        let title = self
            .title
            .as_deref()
            .map(|t| fields::title("title", t))
            .transpose()?;
        let statement = self
            .statement
            .as_deref()
            .map(|t| fields::body("statement", t))
            .transpose()?;
        let rationale = self
            .rationale
            .as_deref()
            .map(|t| fields::body("rationale", t))
            .transpose()?;
        let tags = self.tags.as_deref().map(fields::tags).transpose()?;
        let links = self.links.as_deref().map(links).transpose()?;
        Ok(move |current: &Decision| {
            let mut next = current.clone();
            next.title = title.clone().unwrap_or(next.title);
            next.statement = statement.clone().unwrap_or(next.statement);
            next.rationale = rationale.clone().unwrap_or(next.rationale);
            next.tags = tags.clone().unwrap_or(next.tags);
            next.links = links.clone().unwrap_or(next.links);
            next
        })
    }
}

/// The key a move needs, or 409 INVALID_TRANSITION.
pub fn move_permission(from: DecisionStatus, to: DecisionStatus) -> Result<Permission, ApiError> {
    DECISION_MOVES
        .iter()
        .find(|(f, t, _)| *f == from.name() && *t == to.name())
        .map(|(_, _, key)| *key)
        .ok_or_else(|| ApiError::InvalidTransition {
            from: from.name().into(),
            to: to.name().into(),
        })
}

/// The key a move to `to` needs, whatever it moves from (a move's key
/// depends only on where it goes), so that it can be checked before the
/// decision is read (CONTRACT §11). No move reaches DRAFT: a caller holding
/// none of the move keys gets 403 for it too, rather than learn from a 409
/// or a 404 which decisions exist.
pub fn move_target_permission(
    held: crate::domain::permissions::PermissionSet,
    to: DecisionStatus,
) -> Result<(), ApiError> {
    let keys = DECISION_MOVES.iter().map(|(_, _, key)| *key);
    match DECISION_MOVES.iter().find(|(_, t, _)| *t == to.name()) {
        Some((_, _, key)) => crate::domain::access::require(held, *key),
        None if keys.clone().any(|key| held.contains(key)) => Ok(()),
        None => Err(ApiError::Forbidden(Permission::DecisionsUpdate)),
    }
}

/// Decision status moves and the key each needs (CONTRACT §7); any other
/// move is 409 INVALID_TRANSITION.
pub const DECISION_MOVES: &[(&str, &str, Permission)] = &[
    ("DRAFT", "PENDING", Permission::DecisionsUpdate),
    ("PENDING", "ACCEPTED", Permission::DecisionsAccept),
    ("PENDING", "REJECTED", Permission::DecisionsReject),
    ("PENDING", "DEPRECATED", Permission::DecisionsDeprecate),
    ("ACCEPTED", "DEPRECATED", Permission::DecisionsDeprecate),
];
