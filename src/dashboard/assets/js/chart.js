// The delivery-log chart: attempts per minute over the last hour, by outcome, as SVG.
import { el, svg } from './dom.js';

export const OUTCOMES = ['succeeded', 'failed', 'skipped'];
/** Delivery-log records read at most to draw the last hour's chart. */
export const CHART_RECORD_LIMIT = 2000;

export function drawChart(container, data) {
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

export function niceCeiling(n) {
  if (n <= 4) return 4;
  const power = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= n) return (step * power) % 2 === 0 ? step * power : step * power * 2;
  }
  return n;
}

export function utcClock(ms) {
  const d = new Date(ms);
  return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
}
