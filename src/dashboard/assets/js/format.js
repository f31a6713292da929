// Formatting for display: timestamps, ids and counts; and the browser's
// `datetime-local` values, which are in its own time zone.

export const fmtTime = (ts) => (ts ? `${ts.slice(0, 10)} ${ts.slice(11, 19)} UTC` : '—');
export const shortId = (id) => (id ? `…${id.slice(-8)}` : '—');
export const plural = (n, one, many) => `${n} ${n === 1 ? one : many || `${one}s`}`;

/** `ms` as a `datetime-local` value, in the browser's time zone. */
export function localInput(ms) {
  const offset = new Date(ms).getTimezoneOffset() * 60 * 1000;
  return new Date(ms - offset).toISOString().slice(0, 16);
}

/** A `datetime-local` value as an RFC 3339 instant, or null when empty or invalid. */
export function fromLocalInput(value) {
  const at = Date.parse(value);
  return value && !Number.isNaN(at) ? new Date(at).toISOString() : null;
}

/** The browser's time zone, for hints next to `datetime-local` fields. */
export const timeZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
