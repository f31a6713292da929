// Formatting for display: timestamps, ids and counts.

export const fmtTime = (ts) => (ts ? `${ts.slice(0, 10)} ${ts.slice(11, 19)} UTC` : '—');
export const shortId = (id) => (id ? `…${id.slice(-8)}` : '—');
export const plural = (n, one, many) => `${n} ${n === 1 ? one : many || `${one}s`}`;
