//! Tasks (seed 3.2, CONTRACT §7): open ↔ in-progress ↔ done, adjacent moves only.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::resources::fields;
use crate::domain::resources::{Resource, ResourceKind};
use crate::ids::{OrgId, ResourceId};
use crate::time::Timestamp;

/// A task's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum TaskStatus {
    /// Not started.
    #[serde(rename = "open")]
    Open,
    /// Being worked on.
    #[serde(rename = "in-progress")]
    InProgress,
    /// Finished.
    #[serde(rename = "done")]
    Done,
}

impl TaskStatus {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            TaskStatus::Open => "open",
            TaskStatus::InProgress => "in-progress",
            TaskStatus::Done => "done",
        }
    }

    fn rank(self) -> i8 {
        self as i8
    }
}

/// A task; also its REST representation and its events' `data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    /// Id.
    pub id: ResourceId,
    /// Owner.
    pub organization_id: OrgId,
    /// 1..=200 characters.
    pub title: String,
    /// At most 64 KiB.
    pub description: String,
    /// Status.
    pub status: TaskStatus,
    /// The project it belongs to, if any.
    pub project_id: Option<ResourceId>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// When it was last moved to done; null unless done.
    pub completed_at: Option<Timestamp>,
}

impl Resource for Task {
    const KIND: ResourceKind = ResourceKind::Task;
    const NAME: &'static str = "task";
    fn id(&self) -> ResourceId {
        self.id
    }
    fn touch(&mut self, now: Timestamp) {
        self.updated_at = now;
    }
}

/// Body of `POST …/tasks`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    title: String,
    #[serde(default, deserialize_with = "non_null")]
    description: Option<String>,
    /// A project of this organization.
    #[serde(default, deserialize_with = "non_null")]
    pub project_id: Option<String>,
}

/// Body of `PATCH …/tasks/{id}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateTask {
    #[serde(default, deserialize_with = "non_null")]
    title: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    description: Option<String>,
    /// An adjacent status.
    #[serde(default, deserialize_with = "non_null")]
    pub status: Option<TaskStatus>,
}

impl CreateTask {
    /// A validated new task (status open, no project yet: the caller checks
    /// and sets `project_id`).
    pub fn build(self, org: OrgId) -> Result<Task, ApiError> {
        let now = Timestamp::now();
        Ok(Task {
            id: ResourceId::generate(),
            organization_id: org,
            title: fields::title("title", &self.title)?,
            description: fields::body("description", self.description.as_deref().unwrap_or(""))?,
            status: TaskStatus::Open,
            project_id: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
        })
    }
}

/// What a task PATCH changes.
pub struct TaskPatch {
    title: Option<String>,
    description: Option<String>,
    status: Option<TaskStatus>,
}

impl UpdateTask {
    /// Validates the fields.
    pub fn validate(self) -> Result<TaskPatch, ApiError> {
        Ok(TaskPatch {
            title: self
                .title
                .as_deref()
                .map(|t| fields::title("title", t))
                .transpose()?,
            description: self
                .description
                .as_deref()
                .map(|d| fields::body("description", d))
                .transpose()?,
            status: self.status,
        })
    }
}

impl TaskPatch {
    /// The task after the patch, and whether its status moved: 409
    /// INVALID_TRANSITION unless the move is to an adjacent status.
    pub fn apply(&self, current: &Task, now: Timestamp) -> Result<(Task, bool), ApiError> {
        let mut next = current.clone();
        next.title = self.title.clone().unwrap_or(next.title);
        next.description = self.description.clone().unwrap_or(next.description);
        let mut moved = false;
        if let Some(to) = self.status.filter(|to| *to != current.status) {
            if (to.rank() - current.status.rank()).abs() != 1 {
                return Err(ApiError::InvalidTransition {
                    from: current.status.name().into(),
                    to: to.name().into(),
                });
            }
            next.status = to;
            next.completed_at = (to == TaskStatus::Done).then_some(now);
            moved = true;
        }
        if next != *current {
            next.updated_at = now;
        }
        Ok((next, moved))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_adjacent_moves() {
        let task = CreateTask {
            title: "t".into(),
            description: None,
            project_id: None,
        }
        .build(OrgId::generate());
        let Ok(task) = task else { panic!("valid task") };
        let patch = |status| TaskPatch {
            title: None,
            description: None,
            status: Some(status),
        };
        let now = Timestamp::now();
        assert!(patch(TaskStatus::Done).apply(&task, now).is_err());
        let Ok((started, true)) = patch(TaskStatus::InProgress).apply(&task, now) else {
            panic!("open → in-progress")
        };
        let Ok((done, true)) = patch(TaskStatus::Done).apply(&started, now) else {
            panic!("in-progress → done")
        };
        assert_eq!(done.completed_at, Some(now));
        assert!(patch(TaskStatus::Open).apply(&done, now).is_err());
        let Ok((reopened, true)) = patch(TaskStatus::InProgress).apply(&done, now) else {
            panic!("done → in-progress")
        };
        assert_eq!(reopened.completed_at, None);
    }
}
