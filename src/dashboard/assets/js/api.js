// The public API: one request with the bearer token, paged lists, and its problem codes in words.
import { plural } from './format.js';
import { state, OWNER_REASON, MEMBER_DELETE_REASON } from './state.js';

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && problem.detail) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

export async function api(method, path, body, extraHeaders, token) {
  const headers = { Accept: 'application/json', Authorization: `Bearer ${token || state.token}`, ...extraHeaders };
  const init = { method, headers, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (_) {
    throw new ApiError(0, { detail: 'The server could not be reached.' });
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (_) {
      data = { detail: text.slice(0, 200) };
    }
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return { status: response.status, data, etag: response.headers.get('ETag') };
}

/** Every item of a paged list (200 per request). */
export async function listAll(path) {
  const items = [];
  let cursor = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const query = `${sep}limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = (await api('GET', path + query)).data;
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

/** The contract's error codes, in words a person can act on. */
export function words(err) {
  const p = err.problem || {};
  switch (p.code) {
    case 'ROLE_IN_USE': {
      const n = Number(p.member_count) || 0;
      return `This role still has ${plural(n, 'member')}; move them to another role first.`;
    }
    case 'MUST_HAVE_OWNER': return 'An organization must keep at least one Owner.';
    case 'LICENSE_REQUIRED': return 'Creating, editing or deleting roles needs the Enterprise plan.';
    case 'FORBIDDEN': return `You are not allowed to do this: your role lacks ${p.missing_permission || 'a required permission'}.`;
    case 'PERMISSION_ESCALATION': {
      const keys = Array.isArray(p.missing_permissions) ? p.missing_permissions.join(', ') : '';
      return `You cannot grant or assign permissions you do not hold${keys ? ` (${keys})` : ''}.`;
    }
    case 'ROLE_IMMUTABLE': return OWNER_REASON;
    case 'SYSTEM_ROLE': return MEMBER_DELETE_REASON;
    case 'NAME_CONFLICT': return 'Another role already has this name (names are compared ignoring case).';
    case 'ALREADY_MEMBER': return 'That person is already a member of this organization.';
    case 'EMAIL_TAKEN': return 'That email address is already taken.';
    case 'UNKNOWN_ROLE': return 'That role no longer exists in this organization. Reload and pick another.';
    case 'UNKNOWN_PERMISSION': return `Unknown permission keys: ${(p.unknown || []).join(', ')}.`;
    case 'UNKNOWN_EVENT': return `Unknown event ids: ${(p.unknown || []).join(', ')}.`;
    case 'INVALID_URL': return 'The webhook URL was refused.';
    case 'TEST_REQUIRED': return 'Saving needs a passing Test from the last 15 minutes that was not used yet. Run Test again.';
    case 'PRECONDITION_FAILED': return 'Someone else changed this role while you were editing it. Reload it and make your change again.';
    case 'VALIDATION_FAILED': return `Please check the form${p.field ? ` (${p.field})` : ''}.`;
    case 'UNAUTHENTICATED': return 'Your token was not accepted. Sign in again.';
    case 'NOT_FOUND': return 'Not found: it may have been removed in the meantime.';
    default:
      if (err.status === 0) return 'The server could not be reached. Check your connection and try again.';
      return `The request failed (HTTP ${err.status}).`;
  }
}
