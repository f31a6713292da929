//! The route table of every organization route: which key each needs. It is
//! the one place that says so. Each handler names its route on its first
//! line, and the check happens through it at the contract's step (after the
//! 404s): [`OrgAccess::allow`](crate::http::extract::OrgAccess::allow) and
//! `locate` for reads and workspace changes, the command itself (given the
//! route's [`Needs`]) for the organization's commands. The permission-matrix
//! test is generated from the workspace part, so no route can be forgotten.

use crate::domain::access::Needs;
use crate::domain::permissions::Permission::{self, *};

/// One route and the keys it needs (all of them).
#[derive(Clone, Copy, Debug)]
pub struct RouteSpec {
    /// HTTP method.
    pub method: &'static str,
    /// Path template (as in the OpenAPI document).
    pub path: &'static str,
    /// Keys the caller must hold; empty when any member may, or when the
    /// key depends on the request (an organization's PATCH: see
    /// `commands::organization`; decision status moves: see
    /// [`crate::domain::resources::decisions::DECISION_MOVES`]).
    pub requires: &'static [Permission],
    /// A member acting on their own membership needs none of them.
    pub or_self: bool,
}

impl RouteSpec {
    /// What a command run by this route needs.
    pub const fn needs(self) -> Needs {
        Needs {
            keys: self.requires,
            or_self: self.or_self,
        }
    }
}

macro_rules! routes {
    ($table:ident: $( $name:ident = $method:literal $path:literal [$($key:ident),*] $($or_self:ident)?; )*) => {
        $(
            #[doc = concat!($method, " ", $path)]
            pub const $name: RouteSpec = RouteSpec {
                method: $method,
                path: $path,
                requires: &[$($key),*],
                or_self: routes!(@or_self $($or_self)?),
            };
        )*
        /// The routes of this part of the table.
        pub const $table: &[RouteSpec] = &[$($name),*];
    };
    (@or_self or_self) => { true };
    (@or_self) => { false };
}

routes! {
    ORGANIZATION_ROUTES:
    ORG_GET = "GET" "/organizations/{org_id}" [];
    ORG_UPDATE = "PATCH" "/organizations/{org_id}" [];
    ROLES_LIST = "GET" "/organizations/{org_id}/roles" [];
    ROLES_GET = "GET" "/organizations/{org_id}/roles/{role_id}" [];
    ROLES_CREATE = "POST" "/organizations/{org_id}/roles" [SettingsManage];
    ROLES_UPDATE = "PATCH" "/organizations/{org_id}/roles/{role_id}" [SettingsManage];
    ROLES_DELETE = "DELETE" "/organizations/{org_id}/roles/{role_id}" [SettingsManage];
    ROLE_MEMBERS = "GET" "/organizations/{org_id}/roles/{role_id}/members" [TeamRead];
    MEMBERS_LIST = "GET" "/organizations/{org_id}/members" [TeamRead];
    MEMBERS_GET = "GET" "/organizations/{org_id}/members/{user_id}" [TeamRead] or_self;
    MEMBERS_ADD = "POST" "/organizations/{org_id}/members" [TeamInvite];
    MEMBERS_UPDATE = "PATCH" "/organizations/{org_id}/members/{user_id}" [TeamManage];
    MEMBERS_REMOVE = "DELETE" "/organizations/{org_id}/members/{user_id}" [TeamManage] or_self;
    MEMBER_PERMISSIONS = "GET" "/organizations/{org_id}/members/{user_id}/permissions" [TeamRead] or_self;
    MY_PERMISSIONS = "GET" "/organizations/{org_id}/permissions/mine" [];
    PERMISSIONS_CHECK = "POST" "/organizations/{org_id}/permissions/check" [TeamRead] or_self;
    AUDIT_LOG = "GET" "/organizations/{org_id}/audit-log" [SettingsRead];
    WEBHOOK_GET = "GET" "/organizations/{org_id}/webhook" [SettingsRead];
    WEBHOOK_TEST = "POST" "/organizations/{org_id}/webhook/test" [SettingsManage];
    WEBHOOK_SAVE = "PUT" "/organizations/{org_id}/webhook" [SettingsManage];
    WEBHOOK_ROTATE = "POST" "/organizations/{org_id}/webhook/rotate" [SettingsManage];
    WEBHOOK_DELETE = "DELETE" "/organizations/{org_id}/webhook" [SettingsManage];
    DELIVERIES_LIST = "GET" "/organizations/{org_id}/webhook/deliveries" [SettingsRead];
    DELIVERIES_REDELIVER = "POST" "/organizations/{org_id}/webhook/deliveries/{delivery_id}/redeliver" [SettingsManage];
    WEBHOOK_RECOVER = "POST" "/organizations/{org_id}/webhook/recover" [SettingsManage];
}

routes! {
    WORKSPACE_ROUTES:
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
