// The roles page: the list of roles, and deleting one.
import { el, button, badge, notice, lockWith, pageHead, tableOf, cell } from '../dom.js';
import { api } from '../api.js';
import { permissions } from '../catalog.js';
import { flashError, confirmDialog } from '../feedback.js';
import { plural } from '../format.js';
import { navigate, reload } from '../nav.js';
import { state, MANAGE, planName, orgPath, can, lacks } from '../state.js';

/** Why the caller cannot create, edit or delete roles here, or null. */
export function roleWriteLock() {
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

export async function renderRoles() {
  const catalog = await permissions();
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
    reload();
  } catch (err) {
    flashError(err);
  }
}
