// rolecall dashboard: a single page over the public API (CONTRACT.md).
// Plain DOM code, no dependencies, nothing fetched from elsewhere. The server
// enforces every permission; disabling controls here only explains why.
'use strict';

(() => {
  const TOKEN_KEY = 'rolecall.token';
  const ORG_KEY = 'rolecall.org';
  const PAGE_SIZE = 25;
  /** Delivery-log records read at most to draw the last hour's chart. */
  const CHART_RECORD_LIMIT = 2000;

  const MANAGE = 'org:settings:manage';
  const SETTINGS_READ = 'org:settings:read';
  const TEAM_READ = 'org:team:read';
  const TEAM_INVITE = 'org:team:invite';
  const TEAM_MANAGE = 'org:team:manage';

  /** Seed section 6: the API has no endpoint listing them. */
  const EVENTS = [
    'decision.created', 'decision.updated', 'decision.status_changed', 'decision.deleted',
    'memory.created', 'memory.updated', 'memory.deleted',
    'capsule.created', 'capsule.updated', 'capsule.deleted',
    'task.created', 'task.status_changed', 'task.completed',
    'pr.analysis_completed', 'pr.violation_detected', 'pr.results_accepted',
    'project.created', 'project.import_completed', 'project.import_failed',
    'member.added', 'member.removed', 'member.role_changed',
  ];
  const PREFLIGHT = 'test.preflight';
  const OUTCOMES = ['succeeded', 'failed', 'skipped'];
  const AUDIT_ACTIONS = [
    'organization.created', 'organization.renamed', 'organization.plan_changed',
    'role.created', 'role.updated', 'role.deleted',
    'member.added', 'member.role_changed', 'member.removed',
    'webhook.saved', 'webhook.rotated', 'webhook.deleted',
  ];
  const PLAN_NAMES = { free: 'Free', pro: 'Pro', enterprise: 'Enterprise' };
  const OWNER_REASON = 'The Owner role always holds every permission. It cannot be renamed, edited or deleted.';
  const MEMBER_DELETE_REASON = 'Member is a built-in role: it can be renamed and re-permissioned, but not deleted.';

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY),
    orgId: sessionStorage.getItem(ORG_KEY),
    me: null,
    orgs: [],
    org: null,
    roles: [],
    myRole: null,
    perms: new Set(),
    catalog: null,
    seq: 0,
    carry: null,
  };
  const views = freshViews();

  function freshViews() {
    return {
      deliveries: { event: '', outcome: '', cursors: [null] },
      audit: { action: '', cursors: [null] },
    };
  }

  // ---------------------------------------------------------------- DOM helpers

  const $ = (selector, root = document) => root.querySelector(selector);

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    setProps(node, props);
    append(node, children);
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    setProps(node, attrs);
    append(node, children);
    return node;
  }

  function setProps(node, props) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'text') node.textContent = value;
      else if (key === 'value') node.value = value;
      else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
      else if (value === true) node.setAttribute(key, '');
      else node.setAttribute(key, String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  let idCounter = 0;
  const uid = (prefix) => `${prefix}-${++idCounter}`;

  function field(labelText, control, hint) {
    const id = control.id || uid('field');
    control.id = id;
    let hintNode = null;
    if (hint) {
      hintNode = el('span', { class: 'hint', id: `${id}-hint`, text: hint });
      control.setAttribute('aria-describedby', `${id}-hint`);
    }
    return el('div', { class: 'field' }, el('label', { for: id, text: labelText }), control, hintNode);
  }

  function select(id, options, selected) {
    const node = el('select', { id, name: id });
    for (const option of options) {
      node.append(el('option', {
        value: option.value,
        disabled: option.disabled,
        selected: option.value === selected,
        text: option.label,
      }));
    }
    return node;
  }

  function button(label, props) {
    return el('button', { type: 'button', class: 'btn', ...props }, label);
  }

  function badge(text, kind) {
    return el('span', { class: `badge${kind ? ` badge-${kind}` : ''}`, text });
  }

  function notice(kind, text, id) {
    return el('p', { class: `notice notice-${kind}`, id, text });
  }

  /** Disables `control` and ties it to the visible element that says why. */
  function lockWith(control, reasonId) {
    control.disabled = true;
    if (reasonId) control.setAttribute('aria-describedby', reasonId);
    return control;
  }

  function pageHead(title, lead, ...tools) {
    return el('div', { class: 'page-head' },
      el('div', {},
        el('h1', { tabindex: '-1', text: title }),
        lead ? el('p', { class: 'lead', text: lead }) : null),
      tools.length ? el('div', { class: 'toolbar' }, tools) : null);
  }

  function tableOf(id, caption, headers, rows, emptyText) {
    const head = el('tr', {}, headers.map((h) => el('th', { scope: 'col', class: h.num ? 'num' : null, text: h.label })));
    const body = el('tbody', {});
    if (rows.length === 0) {
      body.append(el('tr', {}, el('td', { class: 'empty', colspan: String(headers.length), text: emptyText })));
    } else {
      body.append(...rows);
    }
    const table = el('table', { id, class: 'stack', role: 'table' },
      el('caption', { class: 'visually-hidden', text: caption }),
      el('thead', { role: 'rowgroup' }, head),
      body);
    // Narrow screens restyle the table as stacked cards; explicit roles keep
    // its table semantics for screen readers either way.
    body.setAttribute('role', 'rowgroup');
    for (const row of table.querySelectorAll('tr')) row.setAttribute('role', 'row');
    for (const th of table.querySelectorAll('th')) th.setAttribute('role', 'columnheader');
    for (const td of table.querySelectorAll('td')) td.setAttribute('role', 'cell');
    return el('div', { class: 'table-wrap' }, table);
  }

  function cell(label, content, props) {
    return el('td', { 'data-label': label, ...props }, content);
  }

  const fmtTime = (ts) => (ts ? `${ts.slice(0, 10)} ${ts.slice(11, 19)} UTC` : '—');
  const shortId = (id) => (id ? `…${id.slice(-8)}` : '—');
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many || `${one}s`}`;
  const planName = (plan) => PLAN_NAMES[plan] || plan;
  const orgPath = (suffix) => `/organizations/${encodeURIComponent(state.orgId)}${suffix}`;
  const can = (key) => state.perms.has(key);
  const roleLabel = () => (state.myRole ? state.myRole.name : 'your role');
  const lacks = (key, purpose) => `Your role (${roleLabel()}) does not include ${key}, which is needed ${purpose}.`;

  // ---------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(status, problem) {
      super((problem && problem.detail) || `HTTP ${status}`);
      this.status = status;
      this.problem = problem || {};
    }
  }

  async function api(method, path, body, extraHeaders, token) {
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
  async function listAll(path) {
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
  function words(err) {
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

  // ---------------------------------------------------------------- status region

  function flash(kind, text, detail) {
    const region = $('#status');
    const dismiss = button('×', { class: 'btn btn-quiet btn-small', 'aria-label': 'Dismiss message' });
    dismiss.addEventListener('click', () => region.replaceChildren());
    region.replaceChildren(el('div', { class: `notice notice-${kind}`, 'data-kind': kind },
      el('div', { class: 'msg' }, el('p', { text }), detail ? el('span', { class: 'detail', text: detail }) : null),
      dismiss));
  }

  function flashError(err) {
    if (err.status === 401) {
      signOut('Your session is no longer valid. Sign in again.');
      return;
    }
    const p = err.problem || {};
    const detail = p.detail ? `Server: ${p.detail}${p.code ? ` (${p.code})` : ''}` : null;
    flash('error', words(err), detail);
  }

  const clearStatus = () => $('#status').replaceChildren();

  // ---------------------------------------------------------------- confirmation dialog

  function confirmDialog(title, body, okLabel) {
    const dialog = $('#confirm');
    $('#confirm-title').textContent = title;
    $('#confirm-body').textContent = body;
    $('#confirm-ok').textContent = okLabel;
    const opener = document.activeElement;
    return new Promise((resolve) => {
      dialog.returnValue = '';
      dialog.addEventListener('close', () => {
        resolve(dialog.returnValue === 'ok');
        if (opener && opener.isConnected) opener.focus();
      }, { once: true });
      dialog.showModal();
      $('#confirm-cancel').focus();
    });
  }

  /** Runs `work` with `control` disabled and relabelled, restoring both after. */
  async function busy(control, label, work) {
    const original = control.textContent;
    control.disabled = true;
    control.textContent = label;
    try {
      return await work();
    } finally {
      control.textContent = original;
      control.disabled = false;
    }
  }

  // ---------------------------------------------------------------- session

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(ORG_KEY);
    Object.assign(state, { token: null, orgId: null, me: null, orgs: [], org: null, roles: [], myRole: null, perms: new Set() });
    Object.assign(views, freshViews());
    state.seq += 1;
    renderSignIn();
    if (message) flash('info', message);
  }

  async function loadSession() {
    const me = (await api('GET', '/me')).data;
    const orgs = await Promise.all(me.memberships.map(async (m) => {
      const org = (await api('GET', `/organizations/${encodeURIComponent(m.organization_id)}`)).data;
      return { id: org.id, name: org.name, plan: org.plan, roleName: m.role_name };
    }));
    orgs.sort((a, b) => a.name.localeCompare(b.name));
    state.me = me;
    state.orgs = orgs;
    if (!orgs.some((o) => o.id === state.orgId)) state.orgId = orgs.length ? orgs[0].id : null;
    if (state.orgId) sessionStorage.setItem(ORG_KEY, state.orgId);
    const picker = $('#org-picker');
    picker.replaceChildren(...orgs.map((o) => el('option', { value: o.id, text: o.name, selected: o.id === state.orgId })));
    $('#who').textContent = me.user.email;
    $('#session').hidden = false;
  }

  /** The organization, its roles and the caller's permissions, fresh for every page. */
  async function loadContext() {
    const [me, org, roles] = await Promise.all([
      api('GET', '/me'),
      api('GET', orgPath('')),
      api('GET', orgPath('/roles')),
    ]);
    state.me = me.data;
    state.org = org.data;
    state.roles = roles.data.items;
    const membership = state.me.memberships.find((m) => m.organization_id === state.orgId);
    state.myRole = membership ? state.roles.find((r) => r.id === membership.role_id) || null : null;
    state.perms = new Set(state.myRole ? state.myRole.permissions : []);
    $('#plan-badge').textContent = planName(state.org.plan);
    $('#plan-badge').setAttribute('aria-label', `Plan: ${planName(state.org.plan)}`);
    const option = [...$('#org-picker').options].find((o) => o.value === state.orgId);
    if (option) option.textContent = state.org.name;
  }

  async function loadCatalog() {
    if (!state.catalog) state.catalog = (await api('GET', '/permissions')).data.items;
    return state.catalog;
  }

  // ---------------------------------------------------------------- routing

  const PAGES = {
    roles: { title: 'Roles', render: (rest) => (rest[0] ? renderRoleForm(rest[0] === 'new' ? null : rest[0]) : renderRoles()) },
    members: { title: 'Members', render: () => renderMembers() },
    webhook: { title: 'Webhook', render: () => renderWebhook() },
    deliveries: { title: 'Delivery log', render: () => renderDeliveries() },
    audit: { title: 'Audit log', render: () => renderAudit() },
  };

  async function route() {
    const seq = ++state.seq;
    if (!state.token) {
      renderSignIn();
      return;
    }
    const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
    const name = PAGES[parts[0]] ? parts[0] : 'roles';
    const focusedId = document.activeElement && document.activeElement.id;
    try {
      if (!state.me) await loadSession();
      if (!state.orgId) {
        show(el('section', {}, pageHead('No organization', null),
          notice('info', 'This account is not a member of any organization yet. Ask an Owner to invite you.')));
        return;
      }
      await loadContext();
      if (seq !== state.seq) return;
      const view = await PAGES[name].render(parts.slice(1));
      if (seq !== state.seq) return;
      $('#nav').hidden = false;
      for (const link of document.querySelectorAll('#nav a')) {
        if (link.dataset.page === name) link.setAttribute('aria-current', 'page');
        else link.removeAttribute('aria-current');
      }
      document.title = `${PAGES[name].title} · ${state.org.name} · rolecall`;
      show(view, focusedId);
    } catch (err) {
      if (seq !== state.seq) return;
      if (err.status === 401) {
        signOut('Your session is no longer valid. Sign in again.');
        return;
      }
      const p = err.problem || {};
      show(el('section', {}, pageHead('Something went wrong', null),
        notice('error', `${words(err)}${p.detail ? ` Server: ${p.detail}` : ''}`)));
    }
  }

  function show(view, focusedId) {
    const main = $('#main');
    main.replaceChildren(view);
    if (state.carry) {
      flash(state.carry.kind, state.carry.text);
      state.carry = null;
    }
    const again = focusedId && document.getElementById(focusedId);
    if (again && main.contains(again) && !again.disabled) again.focus();
    else {
      const heading = $('h1', main);
      if (heading) heading.focus({ preventScroll: true });
    }
  }

  function navigate(hash) {
    clearStatus();
    go(hash);
  }

  // ---------------------------------------------------------------- sign-in

  function renderSignIn() {
    $('#session').hidden = true;
    $('#nav').hidden = true;
    document.title = 'Sign in · rolecall';
    const input = el('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', spellcheck: 'false', required: true });
    const submit = el('button', { type: 'submit', class: 'btn btn-primary', id: 'sign-in', text: 'Sign in' });
    const form = el('form', { class: 'card signin', id: 'signin-form', novalidate: true },
      el('h1', { tabindex: '-1', text: 'Sign in to rolecall' }),
      el('p', { class: 'hint', text: 'Paste an API or session token. It is kept only in this browser tab (sessionStorage) and forgotten when you sign out or close the tab.' }),
      field('Bearer token', input),
      submit);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const token = input.value.trim();
      if (!token) {
        flash('error', 'Enter a token to sign in.');
        input.focus();
        return;
      }
      await busy(submit, 'Signing in…', async () => {
        try {
          await api('GET', '/me', undefined, undefined, token);
        } catch (err) {
          if (err.status === 401) flash('error', 'That token was not accepted. Check that you copied all of it and that it has not been revoked.');
          else flashError(err);
          return;
        }
        sessionStorage.setItem(TOKEN_KEY, token);
        state.token = token;
        clearStatus();
        go(location.hash && location.hash !== '#/' ? location.hash : '#/roles');
      });
    });
    $('#main').replaceChildren(form);
    input.focus();
  }

  // ---------------------------------------------------------------- roles

  function roleWriteLock() {
    if (state.org.plan !== 'enterprise') {
      return `This organization is on the ${planName(state.org.plan)} plan. Roles can be created, edited and deleted only on Enterprise; existing roles stay listed, assignable and in force.`;
    }
    if (!can(MANAGE)) return lacks(MANAGE, 'to create, edit or delete roles');
    return null;
  }

  function roleBadges(role) {
    return [
      role.is_immutable ? badge('Immutable', 'system') : null,
      role.is_system ? badge('Built-in', 'system') : null,
      state.myRole && state.myRole.id === role.id ? badge('Your role', 'you') : null,
    ];
  }

  async function renderRoles() {
    const catalog = await loadCatalog();
    const lock = roleWriteLock();
    const newRole = button('New role', { class: 'btn btn-primary', id: 'new-role' });
    if (lock) lockWith(newRole, 'roles-lock');
    newRole.addEventListener('click', () => navigate('#/roles/new'));
    const total = catalog.length;
    const rows = state.roles.map((role) => {
      const reason = role.is_immutable ? 'Owner cannot be deleted.' : role.is_system ? 'Member cannot be deleted.' : null;
      const del = button('Delete', { class: 'btn btn-danger btn-small', 'aria-label': `Delete role ${role.name}` });
      if (lock) lockWith(del, 'roles-lock');
      else if (reason) lockWith(del, null);
      del.addEventListener('click', () => deleteRole(role));
      const readOnly = Boolean(lock) || role.is_immutable;
      const open = el('a', {
        class: 'btn btn-small', href: `#/roles/${encodeURIComponent(role.id)}`,
        'aria-label': `${readOnly ? 'View' : 'Edit'} role ${role.name}`, text: readOnly ? 'View' : 'Edit',
      });
      return el('tr', { 'data-role-id': role.id, 'data-role-name': role.name },
        cell('Name', el('div', { class: 'name-cell' }, el('strong', { text: role.name }), roleBadges(role))),
        cell('Description', role.description || el('span', { class: 'hint', text: 'No description' })),
        cell('Permissions', `${role.permissions.length} of ${total}`, { class: 'num' }),
        cell('Members', String(role.member_count), { class: 'num members-count' }),
        cell('Actions', el('div', { class: 'actions' }, open, del,
          reason && !lock ? el('span', { class: 'reason', text: reason }) : null)));
    });
    return el('section', {},
      pageHead('Roles', 'Each member holds exactly one role. Permission changes apply on every member\u2019s next request.', newRole),
      lock ? notice('info', lock, 'roles-lock') : null,
      tableOf('roles-table', `Roles of ${state.org.name}`, [
        { label: 'Name' }, { label: 'Description' }, { label: 'Permissions', num: true },
        { label: 'Members', num: true }, { label: 'Actions' },
      ], rows, 'No roles.'));
  }

  async function deleteRole(role) {
    const members = role.member_count ? ` It still has ${plural(role.member_count, 'member')}.` : '';
    const ok = await confirmDialog(`Delete the role \u201c${role.name}\u201d?`,
      `This cannot be undone.${members}`, 'Delete role');
    if (!ok) return;
    try {
      await api('DELETE', orgPath(`/roles/${encodeURIComponent(role.id)}`));
      state.carry = { kind: 'ok', text: `Role \u201c${role.name}\u201d deleted.` };
      route();
    } catch (err) {
      flashError(err);
    }
  }

  function groupByDomain(catalog) {
    const groups = new Map();
    for (const entry of catalog) {
      if (!groups.has(entry.domain)) groups.set(entry.domain, []);
      groups.get(entry.domain).push(entry);
    }
    return groups;
  }

  async function renderRoleForm(roleId) {
    const catalog = await loadCatalog();
    let role = null;
    let etag = null;
    if (roleId) {
      const reply = await api('GET', orgPath(`/roles/${encodeURIComponent(roleId)}`));
      role = reply.data;
      etag = reply.etag;
    }
    const lock = role && role.is_immutable ? OWNER_REASON : roleWriteLock();
    const initial = new Set(role ? role.permissions : []);
    const title = !role ? 'New role' : lock ? `Role \u201c${role.name}\u201d` : `Edit role \u201c${role.name}\u201d`;

    const name = el('input', { type: 'text', id: 'role-name', name: 'name', maxlength: '64', required: true, autocomplete: 'off', value: role ? role.name : '' });
    const description = el('textarea', { id: 'role-description', name: 'description', maxlength: '500', rows: '2' });
    description.value = role ? role.description || '' : '';
    const summary = el('p', { class: 'perm-summary', id: 'perm-summary' });
    const boxes = [];

    const groups = [...groupByDomain(catalog)].map(([domain, entries]) => {
      const count = el('span', { class: 'count' });
      const items = entries.map((entry) => {
        const box = el('input', { type: 'checkbox', name: 'perm', value: entry.key, checked: initial.has(entry.key) });
        const held = can(entry.key);
        const locked = Boolean(lock) || (!held && !initial.has(entry.key));
        box.disabled = locked;
        boxes.push({ box, entry, count });
        return el('label', { class: `perm${!held && !lock ? ' locked' : ''}` }, box,
          el('span', { class: 'perm-text' },
            el('span', { class: 'perm-line' },
              el('span', { class: 'verb', text: entry.verb }),
              entry.sensitive ? badge('Sensitive', 'sensitive') : null),
            el('code', { text: entry.key }),
            !held && !lock ? el('span', { class: 'hint', text: 'You do not hold it, so you cannot grant it.' }) : null));
      });
      return { domain, count, node: el('fieldset', { class: 'perm-group', 'data-domain': domain }, el('legend', {}, `${domain} `, count), items) };
    });

    const refresh = () => {
      const checked = boxes.filter((b) => b.box.checked);
      const sensitive = checked.filter((b) => b.entry.sensitive).length;
      summary.textContent = `${checked.length} of ${catalog.length} permissions selected, ${sensitive} of them sensitive.`;
      for (const group of groups) {
        const inGroup = boxes.filter((b) => b.entry.domain === group.domain);
        group.count.textContent = `${inGroup.filter((b) => b.box.checked).length}/${inGroup.length}`;
      }
    };
    for (const { box } of boxes) box.addEventListener('change', refresh);
    refresh();

    let copyRow = null;
    if (!lock) {
      const sources = state.roles.filter((r) => !role || r.id !== role.id);
      const member = state.roles.find((r) => r.is_system && !r.is_immutable);
      const from = select('copy-from', sources.map((r) => ({ value: r.id, label: r.name })), member ? member.id : null);
      const copy = button('Copy permissions', { id: 'copy-permissions' });
      copy.addEventListener('click', () => {
        const source = state.roles.find((r) => r.id === from.value);
        if (!source) return;
        const keys = new Set(source.permissions);
        let skipped = 0;
        for (const { box, entry } of boxes) {
          if (box.disabled) {
            if (keys.has(entry.key)) skipped += 1;
            continue;
          }
          box.checked = keys.has(entry.key);
        }
        refresh();
        const copied = keys.size - skipped;
        flash('ok', `Copied ${plural(copied, 'permission')} from ${source.name}${skipped ? `; ${skipped} you do not hold were left out` : ''}. Review them, then save.`);
      });
      copyRow = el('div', { class: 'copy-row' },
        field('Copy permissions from', from), copy,
        el('span', { class: 'hint', text: 'Replaces the selection below with that role\u2019s permissions.' }));
    }

    const save = el('button', { type: 'submit', class: 'btn btn-primary', id: 'role-save', text: role ? 'Save changes' : 'Create role' });
    const form = el('form', { id: 'role-form', novalidate: true },
      el('div', { class: 'card' },
        el('h2', { text: 'Details' }),
        field('Name', name, 'Up to 64 characters; unique in the organization, ignoring case.'),
        field('Description', description, 'What the role is for (optional, up to 500 characters).')),
      el('div', { class: 'card' },
        el('div', { class: 'card-head' }, el('h2', { text: 'Permissions' }),
          el('span', { class: 'hint' }, 'Grouped by domain. ', badge('Sensitive', 'sensitive'), ' marks deleting, managing, inviting and revoking.')),
        copyRow,
        summary,
        el('div', { class: 'perm-grid' }, groups.map((g) => g.node))),
      el('div', { class: 'form-actions' },
        lock ? null : save,
        el('a', { class: 'btn', href: '#/roles', text: lock ? 'Back to roles' : 'Cancel' })));

    if (lock) {
      name.disabled = true;
      description.disabled = true;
    }
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (lock) return;
      if (!name.value.trim()) {
        flash('error', 'Give the role a name.');
        name.focus();
        return;
      }
      const body = {
        name: name.value.trim(),
        description: description.value,
        permissions: boxes.filter((b) => b.box.checked).map((b) => b.entry.key),
      };
      await busy(save, 'Saving…', async () => {
        try {
          if (role) {
            await api('PATCH', orgPath(`/roles/${encodeURIComponent(role.id)}`), body, etag ? { 'If-Match': etag } : undefined);
            state.carry = { kind: 'ok', text: `Role \u201c${body.name}\u201d saved.` };
          } else {
            await api('POST', orgPath('/roles'), body);
            state.carry = { kind: 'ok', text: `Role \u201c${body.name}\u201d created.` };
          }
          go('#/roles');
        } catch (err) {
          flashError(err);
        }
      });
    });

    const lead = role
      ? `${plural(role.member_count, 'member')} hold this role. Last changed ${fmtTime(role.updated_at)}.`
      : 'Name the role and choose its permissions. You can start from an existing role.';
    return el('section', {},
      pageHead(title, lead, el('a', { class: 'btn btn-quiet', href: '#/roles', text: '\u2190 All roles' })),
      lock ? notice('info', lock, 'role-lock') : null,
      form);
  }

  // ---------------------------------------------------------------- members

  /** Why the caller cannot assign `role`, or null. */
  function assignLock(role) {
    const missing = role.permissions.filter((k) => !can(k));
    return missing.length ? `${role.name} has ${plural(missing.length, 'permission')} you do not hold` : null;
  }

  function roleChoices(selectedId) {
    return state.roles.map((r) => {
      const lock = assignLock(r);
      return { value: r.id, label: lock ? `${r.name} (has permissions you do not hold)` : r.name, disabled: Boolean(lock) && r.id !== selectedId };
    });
  }

  async function renderMembers() {
    const me = state.me.user.id;
    const members = can(TEAM_READ)
      ? await listAll(orgPath('/members'))
      : [(await api('GET', orgPath(`/members/${encodeURIComponent(me)}`))).data];
    const roleById = new Map(state.roles.map((r) => [r.id, r]));

    const inviteLock = can(TEAM_INVITE) ? null : lacks(TEAM_INVITE, 'to invite members');
    const email = el('input', { type: 'email', id: 'invite-email', name: 'email', autocomplete: 'off', required: true, placeholder: 'name@example.com' });
    const member = state.roles.find((r) => r.is_system && !r.is_immutable);
    const inviteRole = select('invite-role', roleChoices(), member ? member.id : null);
    const invite = el('button', { type: 'submit', class: 'btn btn-primary', id: 'invite-submit', text: 'Invite' });
    if (inviteLock) [email, inviteRole, invite].forEach((c) => lockWith(c, 'invite-lock'));
    const inviteForm = el('form', { class: 'card', id: 'invite-form', novalidate: true },
      el('h2', { text: 'Invite a member' }),
      inviteLock ? notice('info', inviteLock, 'invite-lock') : null,
      el('div', { class: 'row' },
        field('Email', email, 'The person needs a rolecall account already.'),
        el('div', { class: 'field narrow' }, el('label', { for: 'invite-role', text: 'Role' }), inviteRole),
        el('div', { class: 'field narrow' }, invite)));
    inviteForm.addEventListener('submit', async (event) => {
      event.preventDefault();
      const address = email.value.trim();
      if (!address) {
        flash('error', 'Enter the email address of the person to invite.');
        email.focus();
        return;
      }
      const role = roleById.get(inviteRole.value);
      await busy(invite, 'Inviting…', async () => {
        try {
          await api('POST', orgPath('/members'), { email: address, role_id: inviteRole.value });
          state.carry = { kind: 'ok', text: `${address} joined as ${role ? role.name : 'a member'}.` };
          route();
        } catch (err) {
          if (err.status === 404 && (err.problem.code === 'NOT_FOUND')) {
            flash('error', `No rolecall user has the email ${address}. An operator creates accounts first.`, `Server: ${err.problem.detail} (NOT_FOUND)`);
          } else flashError(err);
        }
      });
    });

    const manageLock = can(TEAM_MANAGE) ? null : lacks(TEAM_MANAGE, 'to change roles or remove members');
    const rows = members.map((m) => memberRow(m, me, roleById, manageLock));
    return el('section', {},
      pageHead('Members', `${plural(members.length, 'member')} in ${state.org.name}.`),
      inviteForm,
      can(TEAM_READ) ? null : notice('info', lacks(TEAM_READ, 'to see the other members'), 'members-read-lock'),
      manageLock ? notice('info', manageLock, 'members-lock') : null,
      tableOf('members-table', `Members of ${state.org.name}`,
        [{ label: 'Member' }, { label: 'Role' }, { label: 'Joined' }, { label: 'Actions' }],
        rows, 'No members.'));
  }

  function memberRow(m, me, roleById, manageLock) {
    const self = m.user_id === me;
    const current = roleById.get(m.role_id);
    const targetLock = !self && current ? assignLock(current) : null;
    const selectId = `role-for-${m.user_id}`;
    const picker = select(selectId, roleChoices(m.role_id), m.role_id);
    picker.setAttribute('aria-label', `Role for ${m.email}`);
    const apply = button('Change', { class: 'btn btn-small', 'aria-label': `Change role of ${m.email}` });
    const remove = button(self ? 'Leave' : 'Remove', {
      class: 'btn btn-danger btn-small',
      'aria-label': self ? `Leave ${state.org.name}` : `Remove ${m.email}`,
    });
    let reason = null;
    if (manageLock) {
      lockWith(picker, 'members-lock');
      lockWith(apply, 'members-lock');
      if (!self) lockWith(remove, 'members-lock');
    } else if (targetLock) {
      const reasonId = `reason-${m.user_id}`;
      reason = el('span', { class: 'reason', id: reasonId, text: `Their role has permissions you do not hold.` });
      [picker, apply, remove].forEach((c) => lockWith(c, reasonId));
    }
    if (!manageLock && !targetLock) apply.disabled = true;
    picker.addEventListener('change', () => {
      if (!manageLock && !targetLock) apply.disabled = picker.value === m.role_id;
    });
    apply.addEventListener('click', () => changeRole(m, picker.value, roleById));
    remove.addEventListener('click', () => removeMember(m, self));
    return el('tr', { 'data-user-id': m.user_id, 'data-email': m.email },
      cell('Member', el('div', { class: 'name-cell' }, el('span', { class: 'member-email', text: m.email }), self ? badge('You', 'you') : null)),
      cell('Role', el('div', {},
        el('div', { class: 'cell-select' }, picker, apply),
        el('span', { class: 'sub role-name', text: `Now: ${m.role_name}` }),
        reason)),
      cell('Joined', fmtTime(m.joined_at)),
      cell('Actions', el('div', { class: 'actions' }, remove)));
  }

  async function changeRole(m, roleId, roleById) {
    const role = roleById.get(roleId);
    try {
      await api('PATCH', orgPath(`/members/${encodeURIComponent(m.user_id)}`), { role_id: roleId });
      state.carry = { kind: 'ok', text: `${m.email} is now ${role ? role.name : 'in another role'}.` };
      route();
    } catch (err) {
      flashError(err);
    }
  }

  async function removeMember(m, self) {
    const ok = self
      ? await confirmDialog(`Leave ${state.org.name}?`, 'You lose access to this organization at once.', 'Leave')
      : await confirmDialog(`Remove ${m.email}?`, `They lose access to ${state.org.name} at once.`, 'Remove member');
    if (!ok) return;
    try {
      await api('DELETE', orgPath(`/members/${encodeURIComponent(m.user_id)}`));
      state.carry = { kind: 'ok', text: self ? `You left ${state.org.name}.` : `${m.email} was removed.` };
      if (self) state.me = null;
      route();
    } catch (err) {
      flashError(err);
    }
  }

  // ---------------------------------------------------------------- webhook

  async function loadWebhook() {
    try {
      return (await api('GET', orgPath('/webhook'))).data;
    } catch (err) {
      if (err.status === 404) return null;
      throw err;
    }
  }

  function secretPanel(secret, intro) {
    const value = el('code', { class: 'secret-value', id: 'secret-value', text: secret });
    const copy = button('Copy secret', { id: 'secret-copy' });
    const hide = button('I have stored it', { class: 'btn btn-quiet', id: 'secret-hide' });
    const panel = el('section', { class: 'secret-panel', id: 'secret-panel', 'aria-labelledby': 'secret-title' },
      el('h3', { id: 'secret-title', text: 'Signing secret' }),
      el('p', { text: intro }),
      el('div', { class: 'secret-row' }, value, copy),
      el('p', { class: 'secret-warning', id: 'secret-warning', text: 'You will not see this again. Copy it now and keep it with your subscriber.' }),
      el('div', { class: 'form-actions' }, hide));
    copy.addEventListener('click', async () => {
      if (await copyText(secret)) flash('ok', 'Secret copied to the clipboard.');
      else {
        const range = document.createRange();
        range.selectNodeContents(value);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        flash('info', 'The browser blocked copying. The secret is selected: press Ctrl+C (\u2318C on a Mac).');
      }
    });
    hide.addEventListener('click', () => {
      panel.remove();
      flash('info', 'The secret is hidden and cannot be shown again. Rotate it if it was lost.');
    });
    return panel;
  }

  async function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(text);
        return true;
      } catch (_) {
        // Fall back to a selection copy below.
      }
    }
    const area = el('textarea', { class: 'visually-hidden', readonly: true, 'aria-hidden': 'true', tabindex: '-1' });
    area.value = text;
    document.body.append(area);
    area.select();
    let copied = false;
    try {
      copied = document.execCommand('copy');
    } catch (_) {
      copied = false;
    }
    area.remove();
    return copied;
  }

  function currentEndpoint(hook, manageLock, onRotate, onDelete) {
    if (!hook) {
      return [el('h2', { text: 'Current endpoint' }),
        el('p', { class: 'hint', id: 'webhook-none', text: 'No endpoint is configured. Until one is saved, events are not sent and not recorded in the delivery log.' })];
    }
    const rotate = button('Rotate secret', { id: 'webhook-rotate' });
    const remove = button('Delete endpoint', { class: 'btn btn-danger', id: 'webhook-delete' });
    if (manageLock) [rotate, remove].forEach((c) => lockWith(c, 'webhook-lock'));
    rotate.addEventListener('click', onRotate);
    remove.addEventListener('click', onDelete);
    const events = hook.events.length
      ? el('div', { class: 'chips' }, hook.events.map((e) => badge(e)))
      : el('span', { class: 'hint', text: 'None: every event is recorded as skipped.' });
    return [
      el('div', { class: 'card-head' }, el('h2', { text: 'Current endpoint' }), badge('Active', 'pass')),
      el('dl', { class: 'facts' },
        el('dt', { text: 'URL' }), el('dd', {}, el('code', { id: 'webhook-current-url', text: hook.url })),
        el('dt', { text: 'Events' }), el('dd', {}, events),
        el('dt', { text: 'Signing secret' }), el('dd', { id: 'secret-last4' }, el('code', { text: `whsec_\u2026${hook.secret_last4}` }),
          el('span', { class: 'hint', text: ' Only the last four characters can be shown again.' })),
        el('dt', { text: 'Saved' }), el('dd', { text: fmtTime(hook.updated_at) })),
      el('div', { class: 'actions' }, rotate, remove),
    ];
  }

  function testResult(result) {
    const passed = result.passed;
    return el('section', { class: `result ${passed ? 'result-pass' : 'result-fail'}`, id: 'webhook-result', 'data-passed': String(passed) },
      el('h3', {}, badge(passed ? 'Passed' : 'Failed', passed ? 'pass' : 'fail'),
        passed ? 'The endpoint accepted the test delivery.' : 'The endpoint did not accept the test delivery.'),
      el('dl', { class: 'facts' },
        el('dt', { text: 'Status' }), el('dd', { id: 'result-status', text: result.status_code === null ? 'no answer' : String(result.status_code) }),
        el('dt', { text: 'Latency' }), el('dd', { id: 'result-latency', text: `${result.latency_ms} ms` }),
        result.error ? [el('dt', { text: 'Error' }), el('dd', { class: 'error-text', id: 'result-error', text: result.error })] : null,
        el('dt', { text: 'Response body' }),
        el('dd', {}, result.response_body
          ? el('pre', { class: 'body', id: 'result-body', text: result.response_body })
          : el('span', { class: 'hint', id: 'result-body', text: '(empty)' }))));
  }

  async function renderWebhook() {
    if (!can(SETTINGS_READ)) {
      return el('section', {}, pageHead('Webhook', null), notice('info', lacks(SETTINGS_READ, 'to see the webhook')));
    }
    let hook = await loadWebhook();
    const manageLock = can(MANAGE) ? null : lacks(MANAGE, 'to test, save, rotate or delete the webhook');

    const current = el('section', { class: 'card', id: 'webhook-current' });
    const secretSlot = el('div', { id: 'secret-slot' });
    const drawCurrent = () => current.replaceChildren(...currentEndpoint(hook, manageLock, rotate, remove));

    const url = el('input', { type: 'url', id: 'webhook-url', name: 'url', required: true, autocomplete: 'off', placeholder: 'https://example.com/hooks/rolecall', value: hook ? hook.url : '' });
    const subscribed = new Set(hook ? hook.events : []);
    const boxes = EVENTS.map((id) => el('input', { type: 'checkbox', name: 'event', value: id, checked: subscribed.has(id) }));
    const all = button('Select all', { class: 'btn btn-small', id: 'events-all' });
    const none = button('Clear', { class: 'btn btn-small', id: 'events-none' });
    const test = el('button', { type: 'submit', class: 'btn', id: 'webhook-test', text: 'Test' });
    const save = button('Save', { class: 'btn btn-primary', id: 'webhook-save' });
    const saveReason = el('span', { class: 'hint', id: 'webhook-save-reason', text: 'Save unlocks after a passing Test.' });
    const resultSlot = el('div', { id: 'result-slot', 'aria-live': 'polite' });
    save.disabled = true;
    save.setAttribute('aria-describedby', 'webhook-save-reason');
    if (manageLock) [url, all, none, test, ...boxes].forEach((c) => lockWith(c, 'webhook-lock'));

    /** The passed test that Save would use, while the form still matches it. */
    let passed = null;
    const formKey = () => JSON.stringify([url.value.trim(), boxes.filter((b) => b.checked).map((b) => b.value)]);
    const lockSave = (text) => {
      save.disabled = true;
      saveReason.textContent = text;
    };
    const onEdit = () => {
      if (passed && passed.key !== formKey()) {
        passed = null;
        lockSave('You changed the URL or events after the test. Run Test again to unlock Save.');
      }
    };
    url.addEventListener('input', onEdit);
    boxes.forEach((b) => b.addEventListener('change', onEdit));
    all.addEventListener('click', () => { boxes.forEach((b) => { b.checked = true; }); onEdit(); });
    none.addEventListener('click', () => { boxes.forEach((b) => { b.checked = false; }); onEdit(); });

    const formTitle = el('h2', { text: hook ? 'Change the endpoint' : 'Set up the endpoint' });
    const form = el('form', { class: 'card', id: 'webhook-form', novalidate: true },
      formTitle,
      el('p', { class: 'hint', text: 'Test sends a signed test.preflight POST to the URL and shows the answer. Save unlocks when the endpoint answered 2xx, and saves exactly what was tested.' }),
      field('Endpoint URL', url, 'HTTPS, unless the operator allowed plain HTTP for on-prem use.'),
      el('fieldset', { class: 'events' },
        el('legend', { text: 'Events to send' }),
        el('div', { class: 'events-tools' }, all, none),
        el('div', { class: 'event-grid' }, boxes.map((box) => el('label', { class: 'check' }, box, el('code', { text: box.value }))))),
      el('div', { class: 'form-actions' }, test, save, saveReason),
      resultSlot);

    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (manageLock) return;
      if (!url.value.trim()) {
        flash('error', 'Enter the endpoint URL to test.');
        url.focus();
        return;
      }
      const key = formKey();
      const body = { url: url.value.trim(), events: boxes.filter((b) => b.checked).map((b) => b.value) };
      passed = null;
      lockSave('Testing…');
      await busy(test, 'Testing…', async () => {
        let result;
        try {
          result = (await api('POST', orgPath('/webhook/test'), body)).data;
        } catch (err) {
          lockSave('Fix the problem above, then run Test again.');
          resultSlot.replaceChildren();
          flashError(err);
          return;
        }
        resultSlot.replaceChildren(testResult(result));
        if (result.passed) {
          passed = { key, testId: result.test_id };
          save.disabled = false;
          saveReason.textContent = 'The test passed: Save to use this endpoint.';
          const signedWith = result.secret ? '' : ' It was signed with the current secret, which saving keeps.';
          flash('ok', `Test passed: the endpoint answered ${result.status_code} in ${result.latency_ms} ms.${signedWith}`);
          if (result.secret) {
            secretSlot.replaceChildren(secretPanel(result.secret,
              'This new secret signs every delivery, starting with the test you just saw. It becomes active when you Save.'));
          }
        } else {
          lockSave('The last test failed: the endpoint must answer 2xx before you can save.');
          flash('error', `Test failed: ${result.error || `the endpoint answered ${result.status_code}`}.`);
        }
      });
    });

    save.addEventListener('click', async () => {
      if (!passed) return;
      const testId = passed.testId;
      let saved = false;
      await busy(save, 'Saving…', async () => {
        try {
          hook = (await api('PUT', orgPath('/webhook'), { test_id: testId })).data;
          saved = true;
          drawCurrent();
          formTitle.textContent = 'Change the endpoint';
          flash('ok', `Webhook saved. Events now go to ${hook.url}.`);
        } catch (err) {
          flashError(err);
        }
      });
      passed = null;
      lockSave(saved ? 'Saved. To change the endpoint, run Test again.' : 'Run Test again, then Save.');
    });

    async function rotate() {
      const ok = await confirmDialog('Rotate the signing secret?',
        'A new secret is generated and shown once. The current secret stops working at once: every delivery attempt that starts from now on is signed with the new one, so update your subscriber right away.',
        'Rotate secret');
      if (!ok) return;
      try {
        const { secret } = (await api('POST', orgPath('/webhook/rotate'))).data;
        secretSlot.replaceChildren(secretPanel(secret, 'This is the new signing secret. The previous one no longer works.'));
        hook = await loadWebhook();
        drawCurrent();
        flash('ok', 'Secret rotated. The old secret no longer works.');
        $('#secret-copy').focus();
      } catch (err) {
        flashError(err);
      }
    }

    async function remove() {
      const ok = await confirmDialog('Delete the webhook endpoint?',
        'Events stop being sent and queued deliveries are dropped (logged as failed). You can set up an endpoint again later, with a new secret.',
        'Delete endpoint');
      if (!ok) return;
      try {
        await api('DELETE', orgPath('/webhook'));
        state.carry = { kind: 'ok', text: 'Webhook endpoint deleted.' };
        route();
      } catch (err) {
        flashError(err);
      }
    }

    drawCurrent();
    return el('section', {},
      pageHead('Webhook', 'One endpoint per organization receives signed POSTs for the events you choose.'),
      manageLock ? notice('info', manageLock, 'webhook-lock') : null,
      current,
      secretSlot,
      form);
  }

  // ---------------------------------------------------------------- delivery log

  function deliveryQuery(view, cursor, limit) {
    const params = new URLSearchParams({ limit: String(limit) });
    if (view.event) params.set('event', view.event);
    if (view.outcome) params.set('outcome', view.outcome);
    if (cursor) params.set('cursor', cursor);
    return orgPath(`/webhook/deliveries?${params}`);
  }

  /** Every record of the last hour, newest first (at most CHART_RECORD_LIMIT). */
  async function lastHour() {
    const since = Date.now() - 60 * 60 * 1000;
    const records = [];
    let cursor = null;
    let truncated = false;
    for (;;) {
      const page = (await api('GET', deliveryQuery({}, cursor, 200))).data;
      const recent = page.items.filter((r) => Date.parse(r.attempted_at) >= since);
      records.push(...recent);
      cursor = page.next_cursor;
      if (!cursor || recent.length < page.items.length) break;
      if (records.length >= CHART_RECORD_LIMIT) {
        truncated = true;
        break;
      }
    }
    return { records, truncated, since };
  }

  function drawChart(container, data) {
    const width = Math.max(300, Math.round(container.clientWidth || 720));
    const height = 190;
    const m = { top: 10, right: 8, bottom: 26, left: 34 };
    const minute = 60 * 1000;
    const end = Math.floor(Date.now() / minute) * minute;
    const start = end - 59 * minute;
    const buckets = Array.from({ length: 60 }, () => ({ succeeded: 0, failed: 0, skipped: 0 }));
    for (const r of data.records) {
      const index = Math.floor((Date.parse(r.attempted_at) - start) / minute);
      if (index >= 0 && index < 60 && buckets[index][r.outcome] !== undefined) buckets[index][r.outcome] += 1;
    }
    const peak = Math.max(1, ...buckets.map((b) => b.succeeded + b.failed + b.skipped));
    const top = niceCeiling(peak);
    const plotW = width - m.left - m.right;
    const plotH = height - m.top - m.bottom;
    const slot = plotW / 60;
    const y = (v) => m.top + plotH - (v / top) * plotH;
    const totals = { succeeded: 0, failed: 0, skipped: 0 };
    buckets.forEach((b) => OUTCOMES.forEach((o) => { totals[o] += b[o]; }));
    const description = `Last hour: ${totals.succeeded} succeeded, ${totals.failed} failed, ${totals.skipped} skipped.`;

    const chart = svg('svg', {
      class: 'chart', id: 'delivery-chart-svg', viewBox: `0 0 ${width} ${height}`, width, height,
      role: 'img', 'aria-labelledby': 'chart-svg-title chart-svg-desc',
    },
    svg('title', { id: 'chart-svg-title', text: 'Delivery attempts per minute over the last hour, by outcome' }),
    svg('desc', { id: 'chart-svg-desc', text: description }));
    for (const tick of [0, top / 2, top]) {
      if (tick !== Math.round(tick) && tick !== 0) continue;
      chart.append(svg('line', { class: 'grid', x1: m.left, x2: width - m.right, y1: y(tick), y2: y(tick) }));
      chart.append(svg('text', { x: m.left - 6, y: y(tick) + 4, 'text-anchor': 'end', text: String(tick) }));
    }
    chart.append(svg('line', { class: 'axis', x1: m.left, x2: width - m.right, y1: y(0), y2: y(0) }));
    buckets.forEach((b, i) => {
      const x = m.left + i * slot + slot * 0.15;
      const w = Math.max(1, slot * 0.7);
      const label = utcClock(start + i * minute);
      let base = 0;
      const group = svg('g', { class: 'bar' },
        svg('title', { text: `${label} UTC: ${b.succeeded} succeeded, ${b.failed} failed, ${b.skipped} skipped` }));
      for (const outcome of OUTCOMES) {
        if (!b[outcome]) continue;
        group.append(svg('rect', {
          class: `bar-${outcome}`, x, width: w, y: y(base + b[outcome]), height: y(base) - y(base + b[outcome]),
          'data-outcome': outcome, 'data-count': b[outcome],
        }));
        base += b[outcome];
      }
      chart.append(group);
      const every = width < 500 ? 20 : 10;
      if ((59 - i) % every === 0) {
        chart.append(svg('text', { x: m.left + i * slot + slot / 2, y: height - 8, 'text-anchor': 'middle', text: i === 59 ? 'now' : label }));
      }
    });
    const summary = el('p', { class: 'hint', id: 'chart-summary', text: data.truncated ? `${description} Only the newest ${CHART_RECORD_LIMIT} records were counted.` : description });
    container.replaceChildren(chart, summary);
  }

  function niceCeiling(n) {
    if (n <= 4) return 4;
    const power = 10 ** Math.floor(Math.log10(n));
    for (const step of [1, 2, 5, 10]) {
      if (step * power >= n) return (step * power) % 2 === 0 ? step * power : step * power * 2;
    }
    return n;
  }

  function utcClock(ms) {
    const d = new Date(ms);
    return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
  }

  function deliveryRow(r, redeliverLock, onRedeliver) {
    const redeliver = button('Redeliver', { class: 'btn btn-small', 'aria-label': `Redeliver ${r.event} delivery ${shortId(r.delivery_id)}` });
    if (redeliverLock) lockWith(redeliver, 'redeliver-lock');
    redeliver.addEventListener('click', () => onRedeliver(r, redeliver));
    const body = r.response_body
      ? el('pre', { class: 'body', text: r.response_body })
      : el('span', { class: 'hint', text: '(no response body stored)' });
    return el('tr', { 'data-delivery-id': r.delivery_id, 'data-event': r.event, 'data-outcome': r.outcome },
      cell('Time', fmtTime(r.attempted_at)),
      cell('Event', el('code', { text: r.event })),
      cell('Attempt', r.attempt === null ? '—' : String(r.attempt), { class: 'num' }),
      cell('Outcome', badge(r.outcome, r.outcome)),
      cell('Response', el('div', {},
        r.response_code === null ? '—' : String(r.response_code),
        r.error ? el('span', { class: 'error-text', text: r.error }) : null)),
      cell('Latency', r.latency_ms === null || r.latency_ms === undefined ? '—' : `${r.latency_ms} ms`, { class: 'num' }),
      cell('Details', el('details', {},
        el('summary', {}, 'Response body'),
        body,
        el('span', { class: 'hint', text: `Delivery ${r.delivery_id}` }))),
      cell('Actions', redeliver));
  }

  function pager(view, nextCursor, reload, label) {
    const page = view.cursors.length;
    const newer = button('\u2190 Newer', { class: 'btn btn-small', id: `${label}-newer`, disabled: page <= 1 });
    const older = button('Older \u2192', { class: 'btn btn-small', id: `${label}-older`, disabled: !nextCursor });
    newer.addEventListener('click', () => { view.cursors.pop(); reload(`${label}-newer`); });
    older.addEventListener('click', () => { view.cursors.push(nextCursor); reload(`${label}-older`); });
    return el('nav', { class: 'pager', 'aria-label': 'Pages' }, el('span', { class: 'hint', text: `Page ${page}` }), newer, older);
  }

  async function renderDeliveries() {
    if (!can(SETTINGS_READ)) {
      return el('section', {}, pageHead('Delivery log', null), notice('info', lacks(SETTINGS_READ, 'to see the delivery log')));
    }
    const view = views.deliveries;
    const hook = await loadWebhook();
    const redeliverLock = !can(MANAGE)
      ? lacks(MANAGE, 'to redeliver')
      : !hook ? 'Redelivery needs a configured endpoint: set one up on the Webhook page.' : null;

    const chartBox = el('div', { class: 'chart-wrap', id: 'delivery-chart' });
    const tableSlot = el('div', { id: 'delivery-table-slot' });
    const eventFilter = select('filter-event', [{ value: '', label: 'All events' },
      ...[...EVENTS, PREFLIGHT].map((e) => ({ value: e, label: e }))], view.event);
    const outcomeFilter = select('filter-outcome', [{ value: '', label: 'All outcomes' },
      ...OUTCOMES.map((o) => ({ value: o, label: o }))], view.outcome);
    const refresh = button('Refresh', { id: 'deliveries-refresh' });
    const filters = el('form', { class: 'card', id: 'delivery-filters', 'aria-label': 'Filter the delivery log' },
      el('div', { class: 'row' },
        el('div', { class: 'field' }, el('label', { for: 'filter-event', text: 'Event' }), eventFilter),
        el('div', { class: 'field' }, el('label', { for: 'filter-outcome', text: 'Outcome' }), outcomeFilter),
        el('div', { class: 'field narrow' }, el('div', { class: 'actions' },
          el('button', { type: 'submit', class: 'btn btn-primary', id: 'filters-apply', text: 'Apply filters' }), refresh))));

    let chartData = null;
    const loadChart = async () => {
      chartData = await lastHour();
      drawChart(chartBox, chartData);
    };
    const loadTable = async (focusId) => {
      const cursor = view.cursors[view.cursors.length - 1];
      const page = (await api('GET', deliveryQuery(view, cursor, PAGE_SIZE))).data;
      const rows = page.items.map((r) => deliveryRow(r, redeliverLock, onRedeliver));
      const filtered = view.event || view.outcome;
      tableSlot.replaceChildren(
        tableOf('delivery-table', 'Delivery attempts, newest first', [
          { label: 'Time' }, { label: 'Event' }, { label: 'Attempt', num: true }, { label: 'Outcome' },
          { label: 'Response' }, { label: 'Latency', num: true }, { label: 'Details' }, { label: 'Actions' },
        ], rows, filtered ? 'No deliveries match these filters.' : 'No deliveries yet.'),
        pager(view, page.next_cursor, (id) => reloadAll(id), 'deliveries'));
      const again = focusId && document.getElementById(focusId);
      if (again && !again.disabled) again.focus();
    };
    const reloadAll = async (focusId) => {
      try {
        await Promise.all([loadTable(focusId), loadChart()]);
      } catch (err) {
        flashError(err);
      }
    };
    async function onRedeliver(record, control) {
      await busy(control, 'Sending…', async () => {
        try {
          const { delivery_id: id } = (await api('POST', orgPath(`/webhook/deliveries/${encodeURIComponent(record.delivery_id)}/redeliver`))).data;
          flash('ok', `Redelivery of ${record.event} queued as delivery ${id}.`);
        } catch (err) {
          flashError(err);
        }
      });
      setTimeout(() => reloadAll(), 800);
    }
    filters.addEventListener('submit', (event) => {
      event.preventDefault();
      view.event = eventFilter.value;
      view.outcome = outcomeFilter.value;
      view.cursors = [null];
      reloadAll('filters-apply');
    });
    refresh.addEventListener('click', () => reloadAll('deliveries-refresh'));

    const section = el('section', {},
      pageHead('Delivery log', 'Every attempt to reach the endpoint, newest first. A failed attempt is retried once.'),
      el('section', { class: 'card', 'aria-labelledby': 'chart-title' },
        el('div', { class: 'card-head' }, el('h2', { id: 'chart-title', text: 'Attempts per minute, last hour' })),
        chartBox,
        el('ul', { class: 'legend', 'aria-label': 'Legend' }, OUTCOMES.map((o) => el('li', {}, el('span', { class: `swatch swatch-${o}`, 'aria-hidden': 'true' }), o)))),
      filters,
      redeliverLock ? notice('info', redeliverLock, 'redeliver-lock') : null,
      tableSlot);
    // The chart is sized to its box, so it is drawn once the section is in the page.
    chartData = await lastHour();
    await loadTable();
    requestAnimationFrame(() => drawChart(chartBox, chartData));
    section.redraw = () => { if (chartData && chartBox.isConnected) drawChart(chartBox, chartData); };
    return section;
  }

  // ---------------------------------------------------------------- audit log

  function auditTarget(record) {
    const rep = record.after || record.before || {};
    const label = rep.name || rep.email || rep.url || null;
    return el('div', {},
      el('span', { text: record.target_type }),
      label ? el('span', { class: 'sub', text: label }) : null,
      el('span', { class: 'sub mono', text: shortId(record.target_id) }));
  }

  function changedFields(before, after) {
    if (!before || !after) return [];
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    return [...keys].filter((k) => !['updated_at', 'member_count'].includes(k) && JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  }

  function auditRow(record, people) {
    const actor = record.actor_user_id === null
      ? 'Operator (admin token)'
      : people.get(record.actor_user_id) || shortId(record.actor_user_id);
    const changed = changedFields(record.before, record.after);
    const json = (value) => el('pre', { class: 'body', text: value === null ? 'null' : JSON.stringify(value, null, 2) });
    return el('tr', { 'data-action': record.action },
      cell('Time', fmtTime(record.occurred_at)),
      cell('Actor', actor),
      cell('Action', el('code', { text: record.action })),
      cell('Target', auditTarget(record)),
      cell('Changes', el('details', {},
        el('summary', {}, changed.length ? `Changed: ${changed.join(', ')}` : 'Before and after'),
        el('h3', { class: 'hint', text: 'Before' }), json(record.before),
        el('h3', { class: 'hint', text: 'After' }), json(record.after),
        el('span', { class: 'hint', text: `Request ${record.request_id || '—'}` }))));
  }

  async function renderAudit() {
    if (!can(SETTINGS_READ)) {
      return el('section', {}, pageHead('Audit log', null), notice('info', lacks(SETTINGS_READ, 'to see the audit log')));
    }
    const view = views.audit;
    const people = new Map();
    if (can(TEAM_READ)) {
      for (const m of await listAll(orgPath('/members'))) people.set(m.user_id, m.email);
    }
    people.set(state.me.user.id, state.me.user.email);
    const actionFilter = select('filter-action', [{ value: '', label: 'All actions' },
      ...AUDIT_ACTIONS.map((a) => ({ value: a, label: a }))], view.action);
    const filters = el('form', { class: 'card', id: 'audit-filters', 'aria-label': 'Filter the audit log' },
      el('div', { class: 'row' },
        el('div', { class: 'field' }, el('label', { for: 'filter-action', text: 'Action' }), actionFilter),
        el('div', { class: 'field narrow' }, el('button', { type: 'submit', class: 'btn btn-primary', id: 'audit-apply', text: 'Apply filter' }))));
    const slot = el('div', { id: 'audit-table-slot' });
    const load = async (focusId) => {
      const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
      if (view.action) params.set('action', view.action);
      const cursor = view.cursors[view.cursors.length - 1];
      if (cursor) params.set('cursor', cursor);
      try {
        const page = (await api('GET', orgPath(`/audit-log?${params}`))).data;
        slot.replaceChildren(
          tableOf('audit-table', 'Audit records, newest first',
            [{ label: 'Time' }, { label: 'Actor' }, { label: 'Action' }, { label: 'Target' }, { label: 'Changes' }],
            page.items.map((r) => auditRow(r, people)), 'No audit records match.'),
          pager(view, page.next_cursor, load, 'audit'));
        const again = focusId && document.getElementById(focusId);
        if (again && !again.disabled) again.focus();
      } catch (err) {
        flashError(err);
      }
    };
    filters.addEventListener('submit', (event) => {
      event.preventDefault();
      view.action = actionFilter.value;
      view.cursors = [null];
      load('audit-apply');
    });
    await load();
    return el('section', {},
      pageHead('Audit log', 'Every change to roles, memberships, the plan and the webhook, newest first.'),
      filters, slot);
  }

  // ---------------------------------------------------------------- start

  function start() {
    $('#sign-out').addEventListener('click', () => signOut('You are signed out.'));
    $('#org-picker').addEventListener('change', (event) => {
      state.orgId = event.target.value;
      sessionStorage.setItem(ORG_KEY, state.orgId);
      Object.assign(views, freshViews());
      clearStatus();
      go(location.hash.startsWith('#/roles/') ? '#/roles' : location.hash || '#/roles');
    });
    window.addEventListener('hashchange', () => {
      clearStatus();
      route();
    });
    let resizeTimer = null;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        const section = $('#main > section');
        if (section && typeof section.redraw === 'function') section.redraw();
      }, 150);
    });
    route();
  }

  start();
})();
