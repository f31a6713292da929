// The delivery-log page: the last hour's chart, the filtered and paged attempts,
// redelivery of one attempt, and recovery of everything failed since a time.
import { el, select, button, badge, notice, lockWith, pageHead, tableOf, cell, pager, field } from '../dom.js';
import { api } from '../api.js';
import { eventTypes } from '../catalog.js';
import { OUTCOMES, CHART_RECORD_LIMIT, drawChart } from '../chart.js';
import { flash, flashError, busy } from '../feedback.js';
import { fmtTime, shortId, plural, localInput, fromLocalInput, timeZone } from '../format.js';
import { views, MANAGE, SETTINGS_READ, PAGE_SIZE, orgPath, can, lacks } from '../state.js';
import { loadWebhook } from './webhook.js';

// A filtered page examines at most 1,000 records: an empty one with a cursor
// means "none among these", not "none at all".
function emptyText(filtered, nextCursor) {
  if (!filtered) return 'No deliveries yet.';
  return nextCursor ? 'No matches among the records searched so far: look further with Older.'
    : 'No deliveries match these filters.';
}

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

/**
 * "Recover failed since…": one new delivery for every event whose attempts
 * failed since the chosen time and that has not been delivered since
 * (POST …/webhook/recover); shows how many were queued.
 */
function recoverCard(lock, onRecovered) {
  const zone = timeZone();
  const since = el('input', { type: 'datetime-local', id: 'recover-since', name: 'since', required: true, value: localInput(Date.now() - 60 * 60 * 1000) });
  const submit = el('button', { type: 'submit', class: 'btn', id: 'recover-submit', text: 'Recover failed since\u2026' });
  const result = el('p', { class: 'hint', id: 'recover-result', 'aria-live': 'polite' });
  if (lock) [since, submit].forEach((c) => lockWith(c, 'redeliver-lock'));
  const form = el('form', { class: 'card', id: 'recover-form', novalidate: true, 'aria-labelledby': 'recover-title' },
    el('h2', { id: 'recover-title', text: 'Recover after an outage' }),
    el('p', { class: 'hint', text: 'Sends every event whose delivery failed since this time and has not succeeded since, once, as a new delivery signed with the current secret. Events already queued or recovered are not sent twice.' }),
    el('div', { class: 'row' },
      field('Failed since', since, `In your time zone (${zone}).`),
      el('div', { class: 'field narrow' }, submit)),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (lock) return;
    const iso = fromLocalInput(since.value);
    if (!iso) {
      flash('error', 'Choose the time the outage began.');
      since.focus();
      return;
    }
    await busy(submit, 'Recovering\u2026', async () => {
      try {
        const { count } = (await api('POST', orgPath('/webhook/recover'), { since: iso })).data;
        const text = count
          ? `Recovered ${plural(count, 'failed delivery', 'failed deliveries')} since ${fmtTime(iso)}: each is queued as a new delivery.`
          : `Nothing to recover: no delivery failed since ${fmtTime(iso)} that was not delivered or queued since.`;
        result.textContent = text;
        result.dataset.count = String(count);
        flash('ok', text);
        onRecovered();
      } catch (err) {
        result.textContent = '';
        flashError(err);
      }
    });
  });
  return form;
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

export async function renderDeliveries() {
  if (!can(SETTINGS_READ)) {
    return el('section', {}, pageHead('Delivery log', null), notice('info', lacks(SETTINGS_READ, 'to see the delivery log')));
  }
  const view = views.deliveries;
  const hook = await loadWebhook();
  const types = await eventTypes();
  const redeliverLock = !can(MANAGE)
    ? lacks(MANAGE, 'to redeliver or recover')
    : !hook ? 'Redelivery and recovery need a configured endpoint: set one up on the Webhook page.' : null;

  const chartBox = el('div', { class: 'chart-wrap', id: 'delivery-chart' });
  const tableSlot = el('div', { id: 'delivery-table-slot' });
  const eventFilter = select('filter-event', [{ value: '', label: 'All events' },
    ...types.map((type) => ({ value: type.id, label: type.id }))], view.event);
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
      ], rows, emptyText(filtered, page.next_cursor)),
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
    recoverCard(redeliverLock, () => setTimeout(() => reloadAll(), 800)),
    tableSlot);
  // The chart is sized to its box, so it is drawn once the section is in the page.
  chartData = await lastHour();
  await loadTable();
  requestAnimationFrame(() => drawChart(chartBox, chartData));
  section.redraw = () => { if (chartData && chartBox.isConnected) drawChart(chartBox, chartData); };
  return section;
}
