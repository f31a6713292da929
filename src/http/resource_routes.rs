//! The route table of the workspace resources: which key each route needs.
//! The handlers check exactly these, and the permission-matrix test is
//! generated from this same table, so no route can be forgotten.

use crate::domain::permissions::Permission::{self, *};

/// One route and the keys it needs (all of them).
#[derive(Clone, Copy, Debug)]
pub struct RouteSpec {
    /// HTTP method.
    pub method: &'static str,
    /// Path template (as in the OpenAPI document).
    pub path: &'static str,
    /// Keys the caller must hold; empty when the key depends on the request
    /// (decision status moves: see
    /// [`crate::domain::resources::decisions::DECISION_MOVES`]).
    pub requires: &'static [Permission],
}

macro_rules! routes {
    ($( $name:ident = $method:literal $path:literal [$($key:ident),*]; )*) => {
        $( #[doc = concat!($method, " ", $path)] pub const $name: RouteSpec = RouteSpec { method: $method, path: $path, requires: &[$($key),*] }; )*
        /// Every workspace route.
        pub const ROUTES: &[RouteSpec] = &[$($name),*];
    };
}

routes! {
    DECISIONS_CREATE = "POST" "/organizations/{org_id}/decisions" [DecisionsCreate];
    DECISIONS_LIST = "GET" "/organizations/{org_id}/decisions" [DecisionsRead];
    DECISIONS_GET = "GET" "/organizations/{org_id}/decisions/{id}" [DecisionsRead];
    DECISIONS_UPDATE = "PATCH" "/organizations/{org_id}/decisions/{id}" [DecisionsUpdate];
    DECISIONS_DELETE = "DELETE" "/organizations/{org_id}/decisions/{id}" [DecisionsDelete];
    DECISIONS_STATUS = "POST" "/organizations/{org_id}/decisions/{id}/status" [];
    TASKS_CREATE = "POST" "/organizations/{org_id}/tasks" [TasksCreate];
    TASKS_LIST = "GET" "/organizations/{org_id}/tasks" [TasksRead];
    TASKS_GET = "GET" "/organizations/{org_id}/tasks/{id}" [TasksRead];
    TASKS_UPDATE = "PATCH" "/organizations/{org_id}/tasks/{id}" [TasksUpdate];
    TASKS_DELETE = "DELETE" "/organizations/{org_id}/tasks/{id}" [TasksDelete];
    MEMORIES_CREATE = "POST" "/organizations/{org_id}/memories" [MemoriesCreate];
    MEMORIES_LIST = "GET" "/organizations/{org_id}/memories" [MemoriesRead];
    MEMORIES_GET = "GET" "/organizations/{org_id}/memories/{id}" [MemoriesRead];
    MEMORIES_UPDATE = "PATCH" "/organizations/{org_id}/memories/{id}" [MemoriesUpdate];
    MEMORIES_DELETE = "DELETE" "/organizations/{org_id}/memories/{id}" [MemoriesDelete];
    CAPSULES_CREATE = "POST" "/organizations/{org_id}/capsules" [CapsulesCreate];
    CAPSULES_LIST = "GET" "/organizations/{org_id}/capsules" [CapsulesRead];
    CAPSULES_GET = "GET" "/organizations/{org_id}/capsules/{id}" [CapsulesRead];
    CAPSULES_UPDATE = "PATCH" "/organizations/{org_id}/capsules/{id}" [CapsulesCreate];
    CAPSULES_FREEZE = "POST" "/organizations/{org_id}/capsules/{id}/freeze" [CapsulesFreeze];
    CAPSULES_SUPERSEDE = "POST" "/organizations/{org_id}/capsules/{id}/supersede" [CapsulesSupersede];
    CAPSULES_DELETE = "DELETE" "/organizations/{org_id}/capsules/{id}" [CapsulesCreate, CapsulesRead, CapsulesFreeze, CapsulesSupersede];
    PROJECTS_CREATE = "POST" "/organizations/{org_id}/projects" [ProjectsCreate];
    PROJECTS_LIST = "GET" "/organizations/{org_id}/projects" [ProjectsRead];
    PROJECTS_GET = "GET" "/organizations/{org_id}/projects/{id}" [ProjectsRead];
    PROJECTS_UPDATE = "PATCH" "/organizations/{org_id}/projects/{id}" [ProjectsUpdate];
    PROJECTS_DELETE = "DELETE" "/organizations/{org_id}/projects/{id}" [ProjectsDelete];
    IMPORTS_START = "POST" "/organizations/{org_id}/projects/{id}/imports" [ImportsStart];
    IMPORTS_LIST = "GET" "/organizations/{org_id}/projects/{id}/imports" [ImportsRead];
    IMPORTS_GET = "GET" "/organizations/{org_id}/imports/{id}" [ImportsRead];
    IMPORTS_CANCEL = "POST" "/organizations/{org_id}/imports/{id}/cancel" [ImportsCancel];
    IMPORTS_RESULT = "POST" "/organizations/{org_id}/imports/{id}/result" [ImportsStart];
    ANALYSES_CREATE = "POST" "/organizations/{org_id}/pull-requests/analyses" [ConflictsResolve];
    ANALYSES_LIST = "GET" "/organizations/{org_id}/pull-requests/analyses" [ConflictsRead];
    ANALYSES_GET = "GET" "/organizations/{org_id}/pull-requests/analyses/{id}" [ConflictsRead];
    ANALYSES_ACCEPT = "POST" "/organizations/{org_id}/pull-requests/analyses/{id}/accept" [ConflictsResolve];
}
