//! Projects (CONTRACT §7).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::resources::fields::{self, URL_MAX};
use crate::domain::resources::{Resource, ResourceKind};
use crate::ids::{OrgId, ResourceId};
use crate::time::Timestamp;

/// A project; also its REST representation and its events' `data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Project {
    /// Id.
    pub id: ResourceId,
    /// Owner.
    pub organization_id: OrgId,
    /// 1..=200 characters.
    pub name: String,
    /// The repository to import from, if any.
    pub repository_url: Option<String>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl Resource for Project {
    const KIND: ResourceKind = ResourceKind::Project;
    const NAME: &'static str = "project";
    fn id(&self) -> ResourceId {
        self.id
    }
    fn touch(&mut self, now: Timestamp) {
        self.updated_at = now;
    }
}

/// Body of `POST …/projects`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateProject {
    name: String,
    #[serde(default, deserialize_with = "non_null")]
    repository_url: Option<String>,
}

/// Body of `PATCH …/projects/{id}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateProject {
    #[serde(default, deserialize_with = "non_null")]
    name: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    repository_url: Option<String>,
}

fn repository_url(raw: &str) -> Result<String, ApiError> {
    fields::short_text("repository_url", raw, URL_MAX)
}

impl CreateProject {
    /// A validated new project.
    pub fn build(self, org: OrgId) -> Result<Project, ApiError> {
        let now = Timestamp::now();
        Ok(Project {
            id: ResourceId::generate(),
            organization_id: org,
            name: fields::title("name", &self.name)?,
            repository_url: self
                .repository_url
                .as_deref()
                .map(repository_url)
                .transpose()?,
            created_at: now,
            updated_at: now,
        })
    }
}

impl UpdateProject {
    /// Validates the patch; returns a function applying it.
    pub fn validate(self) -> Result<impl Fn(&Project) -> Project, ApiError> {
        let name = self
            .name
            .as_deref()
            .map(|n| fields::title("name", n))
            .transpose()?;
        let url = self
            .repository_url
            .as_deref()
            .map(repository_url)
            .transpose()?;
        Ok(move |current: &Project| {
            let mut next = current.clone();
            next.name = name.clone().unwrap_or(next.name);
            if url.is_some() {
                next.repository_url = url.clone();
            }
            next
        })
    }
}
