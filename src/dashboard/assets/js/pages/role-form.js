// The role form: create a role, or edit or view one, with its permissions grouped by domain.
import { el, field, select, button, badge, notice, pageHead } from '../dom.js';
import { api } from '../api.js';
import { permissions } from '../catalog.js';
import { flash, flashError, busy } from '../feedback.js';
import { fmtTime, plural } from '../format.js';
import { go } from '../nav.js';
import { state, OWNER_REASON, orgPath, can } from '../state.js';
import { roleWriteLock } from './roles.js';

function groupByDomain(catalog) {
  const groups = new Map();
  for (const entry of catalog) {
    if (!groups.has(entry.domain)) groups.set(entry.domain, []);
    groups.get(entry.domain).push(entry);
  }
  return groups;
}

export async function renderRoleForm(roleId) {
  const catalog = await permissions();
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
