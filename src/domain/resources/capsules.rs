//! Context capsules (CONTRACT §7): editable until frozen; superseding
//! creates a successor and freezes the old one.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::resources::fields::{self, LINKS_MAX, TITLE_MAX, URL_MAX};
use crate::domain::resources::{Resource, ResourceKind};
use crate::ids::{OrgId, ResourceId};
use crate::time::Timestamp;

/// A capsule; also its REST representation and its events' `data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Capsule {
    /// Id.
    pub id: ResourceId,
    /// Owner.
    pub organization_id: OrgId,
    /// 1..=200 characters.
    pub title: String,
    /// At most 64 KiB.
    pub body: String,
    /// What the capsule covers (at most 200 characters).
    pub scope: String,
    /// Up to 20 URLs or ids.
    pub attachments: Vec<String>,
    /// A frozen capsule cannot be edited.
    pub frozen: bool,
    /// The capsule that replaced this one.
    pub superseded_by: Option<ResourceId>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl Resource for Capsule {
    const KIND: ResourceKind = ResourceKind::Capsule;
    const NAME: &'static str = "capsule";
    fn id(&self) -> ResourceId {
        self.id
    }
    fn touch(&mut self, now: Timestamp) {
        self.updated_at = now;
    }
}

/// Body of `POST …/capsules`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCapsule {
    title: String,
    #[serde(default, deserialize_with = "non_null")]
    body: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    scope: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    attachments: Option<Vec<String>>,
}

/// Body of `PATCH …/capsules/{id}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateCapsule {
    #[serde(default, deserialize_with = "non_null")]
    title: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    body: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    scope: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    attachments: Option<Vec<String>>,
}

/// Body of `POST …/capsules/{id}/supersede`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupersedeCapsule {
    /// Defaults to the old title.
    #[serde(default, deserialize_with = "non_null")]
    title: Option<String>,
    body: String,
    /// Defaults to the old scope.
    #[serde(default, deserialize_with = "non_null")]
    scope: Option<String>,
}

fn scope(raw: &str) -> Result<String, ApiError> {
    if raw.trim().is_empty() {
        return Ok(String::new());
    }
    fields::short_text("scope", raw, TITLE_MAX)
}

fn attachments(items: &[String]) -> Result<Vec<String>, ApiError> {
    fields::list("attachments", items, LINKS_MAX, URL_MAX)
}

fn new_capsule(
    org: OrgId,
    title: String,
    body: String,
    scope: String,
    attachments: Vec<String>,
) -> Capsule {
    let now = Timestamp::now();
    Capsule {
        id: ResourceId::generate(),
        organization_id: org,
        title,
        body,
        scope,
        attachments,
        frozen: false,
        superseded_by: None,
        created_at: now,
        updated_at: now,
    }
}

impl CreateCapsule {
    /// A validated new capsule.
    pub fn build(self, org: OrgId) -> Result<Capsule, ApiError> {
        Ok(new_capsule(
            org,
            fields::title("title", &self.title)?,
            fields::body("body", self.body.as_deref().unwrap_or(""))?,
            scope(self.scope.as_deref().unwrap_or(""))?,
            attachments(self.attachments.as_deref().unwrap_or_default())?,
        ))
    }
}

impl UpdateCapsule {
    /// Validates the patch; returns a function applying it (409 CAPSULE_FROZEN on a frozen capsule).
    pub fn validate(self) -> Result<impl Fn(&Capsule) -> Result<Capsule, ApiError>, ApiError> {
        let title = self
            .title
            .as_deref()
            .map(|t| fields::title("title", t))
            .transpose()?;
        let body = self
            .body
            .as_deref()
            .map(|b| fields::body("body", b))
            .transpose()?;
        let scope = self.scope.as_deref().map(scope).transpose()?;
        let attachments = self.attachments.as_deref().map(attachments).transpose()?;
        Ok(move |current: &Capsule| {
            if current.frozen {
                return Err(ApiError::CapsuleFrozen);
            }
            let mut next = current.clone();
            next.title = title.clone().unwrap_or(next.title);
            next.body = body.clone().unwrap_or(next.body);
            next.scope = scope.clone().unwrap_or(next.scope);
            next.attachments = attachments.clone().unwrap_or(next.attachments);
            Ok(next)
        })
    }
}

/// A validated supersede request.
pub struct Succession {
    title: Option<String>,
    body: String,
    scope: Option<String>,
}

impl SupersedeCapsule {
    /// Validates the fields.
    pub fn validate(self) -> Result<Succession, ApiError> {
        Ok(Succession {
            title: self
                .title
                .as_deref()
                .map(|t| fields::title("title", t))
                .transpose()?,
            body: fields::body("body", &self.body)?,
            scope: self.scope.as_deref().map(scope).transpose()?,
        })
    }
}

impl Succession {
    /// The successor and the old capsule, frozen and pointing to it: 409
    /// INVALID_TRANSITION when it was already superseded.
    pub fn apply(&self, old: &Capsule) -> Result<(Capsule, Capsule), ApiError> {
        if old.superseded_by.is_some() {
            return Err(ApiError::InvalidTransition {
                from: "superseded".into(),
                to: "superseded".into(),
            });
        }
        let successor = new_capsule(
            old.organization_id,
            self.title.clone().unwrap_or_else(|| old.title.clone()),
            self.body.clone(),
            self.scope.clone().unwrap_or_else(|| old.scope.clone()),
            old.attachments.clone(),
        );
        let mut replaced = old.clone();
        replaced.frozen = true;
        replaced.superseded_by = Some(successor.id);
        replaced.updated_at = successor.created_at;
        Ok((successor, replaced))
    }
}
