// The members page: invite a member, change a member's role or when it ends,
// remove a member or leave.
import { el, field, select, button, badge, notice, lockWith, pageHead, tableOf, cell } from '../dom.js';
import { api, listAll } from '../api.js';
import { flash, flashError, confirmDialog, busy } from '../feedback.js';
import { fmtTime, plural, localInput, fromLocalInput, timeZone } from '../format.js';
import { reload } from '../nav.js';
import { state, TEAM_READ, TEAM_INVITE, TEAM_MANAGE, orgPath, can, lacks } from '../state.js';

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

export async function renderMembers() {
  const me = state.me.user.id;
  const members = can(TEAM_READ)
    ? await listAll(orgPath('/members'))
    : [(await api('GET', orgPath(`/members/${encodeURIComponent(me)}`))).data];
  const roleById = new Map(state.roles.map((r) => [r.id, r]));

  const inviteLock = can(TEAM_INVITE) ? null : lacks(TEAM_INVITE, 'to invite members');
  const email = el('input', { type: 'email', id: 'invite-email', name: 'email', autocomplete: 'off', required: true, placeholder: 'name@example.com' });
  const member = state.roles.find((r) => r.is_system && !r.is_immutable);
  const inviteRole = select('invite-role', roleChoices(), member ? member.id : null);
  const inviteEnds = el('input', { type: 'datetime-local', id: 'invite-expires', name: 'role_expires_at' });
  const invite = el('button', { type: 'submit', class: 'btn btn-primary', id: 'invite-submit', text: 'Invite' });
  if (inviteLock) [email, inviteRole, inviteEnds, invite].forEach((c) => lockWith(c, 'invite-lock'));
  const inviteForm = el('form', { class: 'card', id: 'invite-form', novalidate: true },
    el('h2', { text: 'Invite a member' }),
    inviteLock ? notice('info', inviteLock, 'invite-lock') : null,
    el('div', { class: 'row' },
      field('Email', email, 'The person needs a rolecall account already.'),
      el('div', { class: 'field narrow' }, el('label', { for: 'invite-role', text: 'Role' }), inviteRole),
      field('Role ends (optional)', inviteEnds, `Then they hold Member. In your time zone (${timeZone()}).`),
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
        const body = { email: address, role_id: inviteRole.value };
        const ends = fromLocalInput(inviteEnds.value);
        if (ends) body.role_expires_at = ends;
        await api('POST', orgPath('/members'), body);
        state.carry = { kind: 'ok', text: `${address} joined as ${role ? role.name : 'a member'}.` };
        reload();
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
  const lock = manageLock ? 'members-lock' : targetLock ? `reason-${m.user_id}` : null;
  return el('tr', { 'data-user-id': m.user_id, 'data-email': m.email },
    cell('Member', el('div', { class: 'name-cell' }, el('span', { class: 'member-email', text: m.email }), self ? badge('You', 'you') : null)),
    cell('Role', el('div', {},
      el('div', { class: 'cell-select' }, picker, apply),
      el('span', { class: 'sub role-name', text: `Now: ${m.role_name}` }),
      m.role_expires_at ? el('span', { class: 'sub role-expiry', text: `Until ${fmtTime(m.role_expires_at)}, then Member` }) : null,
      current && current.is_system ? null : expiryControl(m, lock),
      reason)),
    cell('Joined', fmtTime(m.joined_at)),
    cell('Actions', el('div', { class: 'actions' }, remove)));
}

/** "Set an end" / "Change the end": when the member's role assignment ends. */
function expiryControl(m, lock) {
  const id = `expires-for-${m.user_id}`;
  const until = el('input', {
    type: 'datetime-local', id, name: 'role_expires_at',
    value: localInput(m.role_expires_at ? Date.parse(m.role_expires_at) : Date.now() + 7 * 24 * 60 * 60 * 1000),
  });
  until.setAttribute('aria-label', `End of the role of ${m.email}`);
  const save = button('Save end', { class: 'btn btn-small expiry-save', 'aria-label': `Save the end of the role of ${m.email}` });
  const clear = m.role_expires_at
    ? button('Remove end', { class: 'btn btn-small expiry-clear', 'aria-label': `Remove the end of the role of ${m.email}` })
    : null;
  const controls = [until, save, clear].filter(Boolean);
  if (lock) controls.forEach((c) => lockWith(c, lock));
  save.addEventListener('click', () => {
    const ends = fromLocalInput(until.value);
    if (!ends) {
      flash('error', 'Choose when the role ends.');
      until.focus();
      return;
    }
    setExpiry(m, ends);
  });
  if (clear) clear.addEventListener('click', () => setExpiry(m, null));
  return el('details', { class: 'expiry' },
    el('summary', {}, m.role_expires_at ? 'Change the end' : 'Set an end'),
    el('div', { class: 'cell-select' }, controls),
    el('span', { class: 'hint', text: `In your time zone (${timeZone()}); at most a year ahead.` }));
}

async function setExpiry(m, ends) {
  try {
    await api('PATCH', orgPath(`/members/${encodeURIComponent(m.user_id)}`), { role_expires_at: ends });
    state.carry = {
      kind: 'ok',
      text: ends ? `${m.email} holds ${m.role_name} until ${fmtTime(ends)}, then Member.` : `${m.email} holds ${m.role_name} until it is changed.`,
    };
    reload();
  } catch (err) {
    flashError(err);
  }
}

async function changeRole(m, roleId, roleById) {
  const role = roleById.get(roleId);
  try {
    await api('PATCH', orgPath(`/members/${encodeURIComponent(m.user_id)}`), { role_id: roleId });
    state.carry = { kind: 'ok', text: `${m.email} is now ${role ? role.name : 'in another role'}.` };
    reload();
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
    reload();
  } catch (err) {
    flashError(err);
  }
}
