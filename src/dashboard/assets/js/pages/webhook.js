// The webhook page: Test then Save an endpoint, the signing secret shown once, rotate and delete.
import { $, el, field, button, badge, notice, lockWith, pageHead } from '../dom.js';
import { api } from '../api.js';
import { eventTypes } from '../catalog.js';
import { flash, flashError, confirmDialog, busy } from '../feedback.js';
import { fmtTime } from '../format.js';
import { reload } from '../nav.js';
import { state, MANAGE, SETTINGS_READ, orgPath, can, lacks } from '../state.js';

export async function loadWebhook() {
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
  const disabled = hook.status === 'disabled';
  const why = hook.disabled_reason === 'gone'
    ? 'it answered 410 Gone'
    : 'every delivery to it failed for too long';
  return [
    el('div', { class: 'card-head' }, el('h2', { text: 'Current endpoint' }),
      disabled ? badge('Disabled', 'fail') : badge('Active', 'pass')),
    disabled
      ? notice('error', `Disabled ${fmtTime(hook.disabled_at)}: ${why}. Nothing is sent to it; new events are logged as skipped (endpoint disabled). Test the endpoint, then save it, to enable it again; "Recover" then sends what was skipped.`, 'webhook-disabled')
      : null,
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

export async function renderWebhook() {
  if (!can(SETTINGS_READ)) {
    return el('section', {}, pageHead('Webhook', null), notice('info', lacks(SETTINGS_READ, 'to see the webhook')));
  }
  let hook = await loadWebhook();
  // test.preflight goes out on every Test, whatever the subscription: it is not offered.
  const events = (await eventTypes()).map((type) => type.id).filter((id) => id !== 'test.preflight');
  const manageLock = can(MANAGE) ? null : lacks(MANAGE, 'to test, save, rotate or delete the webhook');

  const current = el('section', { class: 'card', id: 'webhook-current' });
  const secretSlot = el('div', { id: 'secret-slot' });
  const drawCurrent = () => current.replaceChildren(...currentEndpoint(hook, manageLock, rotate, remove));

  const url = el('input', { type: 'url', id: 'webhook-url', name: 'url', required: true, autocomplete: 'off', placeholder: 'https://example.com/hooks/rolecall', value: hook ? hook.url : '' });
  const subscribed = new Set(hook ? hook.events : []);
  const boxes = events.map((id) => el('input', { type: 'checkbox', name: 'event', value: id, checked: subscribed.has(id) }));
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
      reload();
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
