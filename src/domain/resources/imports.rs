//! Project imports (CONTRACT §7): running → completed | failed | cancelled.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::resources::fields::{self, URL_MAX};
use crate::domain::resources::{Resource, ResourceKind};
use crate::ids::ResourceId;
use crate::time::Timestamp;

/// An import's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImportStatus {
    /// Importing.
    Running,
    /// Finished successfully.
    Completed,
    /// Errored (see `failure_reason`).
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl ImportStatus {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            ImportStatus::Running => "running",
            ImportStatus::Completed => "completed",
            ImportStatus::Failed => "failed",
            ImportStatus::Cancelled => "cancelled",
        }
    }
}

/// An import; also its REST representation and its events' `data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Import {
    /// Id.
    pub id: ResourceId,
    /// The project imported into.
    pub project_id: ResourceId,
    /// What is imported (a repository URL or reference).
    pub source: String,
    /// Status.
    pub status: ImportStatus,
    /// Why it failed; null otherwise.
    pub failure_reason: Option<String>,
    /// Started.
    pub created_at: Timestamp,
    /// When it finished; null while running.
    pub finished_at: Option<Timestamp>,
}

impl Resource for Import {
    const KIND: ResourceKind = ResourceKind::Import;
    const NAME: &'static str = "import";
    fn id(&self) -> ResourceId {
        self.id
    }
    fn touch(&mut self, _: Timestamp) {}
    fn parent(&self) -> Option<ResourceId> {
        Some(self.project_id)
    }
}

/// Body of `POST …/projects/{id}/imports`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartImport {
    source: String,
}

/// The importer's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    /// Finished successfully.
    Completed,
    /// Errored.
    Failed,
}

/// Body of `POST …/imports/{id}/result` (its schema: a `failure_reason` only with `failed`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportResult {
    /// `completed` or `failed`.
    pub status: ResultStatus,
    /// Why it failed (only with `failed`; at most 2000 characters).
    #[serde(default, deserialize_with = "non_null")]
    pub failure_reason: Option<String>,
}

impl StartImport {
    /// A validated running import of `project`.
    pub fn build(self, project: ResourceId) -> Result<Import, ApiError> {
        Ok(Import {
            id: ResourceId::generate(),
            project_id: project,
            source: fields::short_text("source", &self.source, URL_MAX)?,
            status: ImportStatus::Running,
            failure_reason: None,
            created_at: Timestamp::now(),
            finished_at: None,
        })
    }
}

impl ImportResult {
    /// Validates: a failure reason only with `failed`.
    pub fn validate(self) -> Result<(ImportStatus, Option<String>), ApiError> {
        match (self.status, self.failure_reason) {
            (ResultStatus::Completed, Some(_)) => Err(ApiError::invalid(
                "failure_reason",
                "only a failed import has one",
            )),
            (ResultStatus::Completed, None) => Ok((ImportStatus::Completed, None)),
            (ResultStatus::Failed, reason) => {
                let reason = fields::short_text(
                    "failure_reason",
                    reason.as_deref().unwrap_or("unknown error"),
                    2000,
                )?;
                Ok((ImportStatus::Failed, Some(reason)))
            }
        }
    }
}

/// Finishes a running import: 409 INVALID_TRANSITION when it already finished.
pub fn finish(
    import: &Import,
    status: ImportStatus,
    reason: Option<String>,
) -> Result<Import, ApiError> {
    if import.status != ImportStatus::Running {
        return Err(ApiError::InvalidTransition {
            from: import.status.name().into(),
            to: status.name().into(),
        });
    }
    let mut next = import.clone();
    next.status = status;
    next.failure_reason = reason;
    next.finished_at = Some(Timestamp::now());
    Ok(next)
}
