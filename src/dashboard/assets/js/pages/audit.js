// The audit-log page: every change to roles, memberships, the plan and the webhook, filtered by action.
import { el, select, pageHead, notice, tableOf, cell, pager } from '../dom.js';
import { api, listAll } from '../api.js';
import { auditActions } from '../catalog.js';
import { flashError } from '../feedback.js';
import { fmtTime, shortId } from '../format.js';
import { state, views, SETTINGS_READ, TEAM_READ, PAGE_SIZE, orgPath, can, lacks } from '../state.js';

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

export async function renderAudit() {
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
    ...(await auditActions()).map((a) => ({ value: a, label: a }))], view.action);
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
          page.items.map((r) => auditRow(r, people)), page.next_cursor
            // A filtered page examines at most 1,000 records.
            ? 'No matches among the records searched so far: look further with Older.'
            : 'No audit records match.'),
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
