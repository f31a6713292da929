// DOM helpers: elements, form fields, buttons, badges, notices, tables and the pager.

export const $ = (selector, root = document) => root.querySelector(selector);

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  setProps(node, props);
  append(node, children);
  return node;
}

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setProps(node, attrs);
  append(node, children);
  return node;
}

function setProps(node, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = value;
    else if (key === 'value') node.value = value;
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, '');
    else node.setAttribute(key, String(value));
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

let idCounter = 0;
export const uid = (prefix) => `${prefix}-${++idCounter}`;

export function field(labelText, control, hint) {
  const id = control.id || uid('field');
  control.id = id;
  let hintNode = null;
  if (hint) {
    hintNode = el('span', { class: 'hint', id: `${id}-hint`, text: hint });
    control.setAttribute('aria-describedby', `${id}-hint`);
  }
  return el('div', { class: 'field' }, el('label', { for: id, text: labelText }), control, hintNode);
}

export function select(id, options, selected) {
  const node = el('select', { id, name: id });
  for (const option of options) {
    node.append(el('option', {
      value: option.value,
      disabled: option.disabled,
      selected: option.value === selected,
      text: option.label,
    }));
  }
  return node;
}

export function button(label, props) {
  return el('button', { type: 'button', class: 'btn', ...props }, label);
}

export function badge(text, kind) {
  return el('span', { class: `badge${kind ? ` badge-${kind}` : ''}`, text });
}

export function notice(kind, text, id) {
  return el('p', { class: `notice notice-${kind}`, id, text });
}

/** Disables `control` and ties it to the visible element that says why. */
export function lockWith(control, reasonId) {
  control.disabled = true;
  if (reasonId) control.setAttribute('aria-describedby', reasonId);
  return control;
}

export function pageHead(title, lead, ...tools) {
  return el('div', { class: 'page-head' },
    el('div', {},
      el('h1', { tabindex: '-1', text: title }),
      lead ? el('p', { class: 'lead', text: lead }) : null),
    tools.length ? el('div', { class: 'toolbar' }, tools) : null);
}

export function tableOf(id, caption, headers, rows, emptyText) {
  const head = el('tr', {}, headers.map((h) => el('th', { scope: 'col', class: h.num ? 'num' : null, text: h.label })));
  const body = el('tbody', {});
  if (rows.length === 0) {
    body.append(el('tr', {}, el('td', { class: 'empty', colspan: String(headers.length), text: emptyText })));
  } else {
    body.append(...rows);
  }
  const table = el('table', { id, class: 'stack', role: 'table' },
    el('caption', { class: 'visually-hidden', text: caption }),
    el('thead', { role: 'rowgroup' }, head),
    body);
  // Narrow screens restyle the table as stacked cards; explicit roles keep
  // its table semantics for screen readers either way.
  body.setAttribute('role', 'rowgroup');
  for (const row of table.querySelectorAll('tr')) row.setAttribute('role', 'row');
  for (const th of table.querySelectorAll('th')) th.setAttribute('role', 'columnheader');
  for (const td of table.querySelectorAll('td')) td.setAttribute('role', 'cell');
  return el('div', { class: 'table-wrap' }, table);
}

export function cell(label, content, props) {
  return el('td', { 'data-label': label, ...props }, content);
}

/** Newer and Older buttons over `view.cursors`; `reload(focusId)` draws the page again. */
export function pager(view, nextCursor, reload, label) {
  const page = view.cursors.length;
  const newer = button('\u2190 Newer', { class: 'btn btn-small', id: `${label}-newer`, disabled: page <= 1 });
  const older = button('Older \u2192', { class: 'btn btn-small', id: `${label}-older`, disabled: !nextCursor });
  newer.addEventListener('click', () => { view.cursors.pop(); reload(`${label}-newer`); });
  older.addEventListener('click', () => { view.cursors.push(nextCursor); reload(`${label}-older`); });
  return el('nav', { class: 'pager', 'aria-label': 'Pages' }, el('span', { class: 'hint', text: `Page ${page}` }), newer, older);
}
