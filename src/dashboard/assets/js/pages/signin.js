// The sign-in page: a bearer token, kept in this tab's sessionStorage.
import { $, el, field } from '../dom.js';
import { api } from '../api.js';
import { flash, flashError, clearStatus, busy } from '../feedback.js';
import { go } from '../nav.js';
import { state, TOKEN_KEY } from '../state.js';

export function renderSignIn() {
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
