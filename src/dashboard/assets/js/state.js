// The session's state shared by every page, the permission keys and the wording of what a role lacks.

export const TOKEN_KEY = 'rolecall.token';
export const ORG_KEY = 'rolecall.org';
export const PAGE_SIZE = 25;

export const MANAGE = 'org:settings:manage';
export const SETTINGS_READ = 'org:settings:read';
export const TEAM_READ = 'org:team:read';
export const TEAM_INVITE = 'org:team:invite';
export const TEAM_MANAGE = 'org:team:manage';

export const PLAN_NAMES = { free: 'Free', pro: 'Pro', enterprise: 'Enterprise' };
export const OWNER_REASON = 'The Owner role always holds every permission. It cannot be renamed, edited or deleted.';
export const MEMBER_DELETE_REASON = 'Member is a built-in role: it can be renamed and re-permissioned, but not deleted.';

export const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  orgId: sessionStorage.getItem(ORG_KEY),
  me: null,
  orgs: [],
  org: null,
  roles: [],
  myRole: null,
  perms: new Set(),
  seq: 0,
  carry: null,
};
export const views = freshViews();

export function freshViews() {
  return {
    deliveries: { event: '', outcome: '', cursors: [null] },
    audit: { action: '', cursors: [null] },
  };
}

export const planName = (plan) => PLAN_NAMES[plan] || plan;
export const orgPath = (suffix) => `/organizations/${encodeURIComponent(state.orgId)}${suffix}`;
export const can = (key) => state.perms.has(key);
export const roleLabel = () => (state.myRole ? state.myRole.name : 'your role');
export const lacks = (key, purpose) => `Your role (${roleLabel()}) does not include ${key}, which is needed ${purpose}.`;
