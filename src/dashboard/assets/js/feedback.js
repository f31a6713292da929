// Feedback to the person: the status region, the confirmation dialog and busy buttons.
import { $, el, button } from './dom.js';
import { words } from './api.js';
import { signOut } from './nav.js';

export function flash(kind, text, detail) {
  const region = $('#status');
  const dismiss = button('×', { class: 'btn btn-quiet btn-small', 'aria-label': 'Dismiss message' });
  dismiss.addEventListener('click', () => region.replaceChildren());
  region.replaceChildren(el('div', { class: `notice notice-${kind}`, 'data-kind': kind },
    el('div', { class: 'msg' }, el('p', { text }), detail ? el('span', { class: 'detail', text: detail }) : null),
    dismiss));
}

export function flashError(err) {
  if (err.status === 401) {
    signOut('Your session is no longer valid. Sign in again.');
    return;
  }
  const p = err.problem || {};
  const detail = p.detail ? `Server: ${p.detail}${p.code ? ` (${p.code})` : ''}` : null;
  flash('error', words(err), detail);
}

export const clearStatus = () => $('#status').replaceChildren();

export function confirmDialog(title, body, okLabel) {
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
export async function busy(control, label, work) {
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
