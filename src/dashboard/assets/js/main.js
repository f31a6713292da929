// Entry point of the rolecall dashboard: the router, the session and the page chrome.
// A single page over the public API (CONTRACT.md). Plain DOM code, no
// dependencies, nothing fetched from elsewhere. The server enforces every
// permission; disabling controls here only explains why.
import { $, el, notice, pageHead } from './dom.js';
import { api, words } from './api.js';
import { clearCatalog } from './catalog.js';
import { flash, clearStatus } from './feedback.js';
import { go, setHandlers } from './nav.js';
import { state, views, freshViews, TOKEN_KEY, ORG_KEY, planName, orgPath } from './state.js';
import { renderAudit } from './pages/audit.js';
import { renderDeliveries } from './pages/deliveries.js';
import { renderEvents } from './pages/events.js';
import { renderMembers } from './pages/members.js';
import { renderRoleForm } from './pages/role-form.js';
import { renderRoles } from './pages/roles.js';
import { renderSignIn } from './pages/signin.js';
import { renderWebhook } from './pages/webhook.js';

const PAGES = {
  roles: { title: 'Roles', render: (rest) => (rest[0] ? renderRoleForm(rest[0] === 'new' ? null : rest[0]) : renderRoles()) },
  members: { title: 'Members', render: () => renderMembers() },
  webhook: { title: 'Webhook', render: () => renderWebhook() },
  events: { title: 'Events', render: (rest) => renderEvents(rest) },
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

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(ORG_KEY);
  Object.assign(state, { token: null, orgId: null, me: null, orgs: [], org: null, roles: [], myRole: null, perms: new Set() });
  Object.assign(views, freshViews());
  clearCatalog();
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

setHandlers({ route, signOut });
start();
