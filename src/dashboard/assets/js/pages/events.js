// The event catalog: every event type from GET /event-types, with the JSON
// Schema of its envelope and an example generated from that schema.

import { el, pageHead, badge } from '../dom.js';
import { eventTypes } from '../catalog.js';
import { exampleOf } from '../schema-example.js';

const PREFLIGHT = 'test.preflight';

/** `#/events` and `#/events/{id}`: the list, and the viewer of one type. */
export async function renderEvents(rest) {
  const types = await eventTypes();
  const chosen = types.find((t) => t.id === rest[0]) || types[0];
  const list = el('ul', { class: 'event-list', id: 'event-type-list' }, types.map((t) => el('li', {},
    el('a', {
      href: `#/events/${encodeURIComponent(t.id)}`,
      'data-event-type': t.id,
      'aria-current': t === chosen ? 'true' : null,
    }, el('code', { text: t.id })))));
  const nav = el('nav', { class: 'card event-nav', 'aria-label': 'Event types' }, list);
  // On narrow screens the list scrolls in a short box: bring the chosen one into it.
  requestAnimationFrame(() => {
    const current = nav.querySelector('[aria-current]');
    if (current && nav.scrollHeight > nav.clientHeight) {
      nav.scrollTop += current.getBoundingClientRect().top - nav.getBoundingClientRect().top - 8;
    }
  });
  return el('section', {},
    pageHead('Events', 'What each webhook event sends: the JSON Schema (2020-12) of its envelope and an example. The same schemas are served at GET /event-types and in the OpenAPI document\u2019s webhooks section.'),
    el('div', { class: 'event-browser' },
      nav,
      chosen ? viewer(chosen) : el('p', { class: 'hint', text: 'No event types.' })));
}

/** `text` with its `backticked` parts as code. */
function withCode(text) {
  return text.split('`').map((part, i) => (i % 2 ? el('code', { text: part }) : part));
}

function viewer(type) {
  const example = JSON.stringify(exampleOf(type.schema), null, 2);
  const schema = JSON.stringify(type.schema, null, 2);
  return el('article', { class: 'event-viewer', id: 'event-viewer', 'data-event-type': type.id, 'aria-labelledby': 'event-title' },
    el('div', { class: 'card' },
      el('div', { class: 'card-head' },
        el('h2', { id: 'event-title' }, el('code', { text: type.id })),
        type.id === PREFLIGHT ? badge('Sent by Test only', 'system') : badge('Subscribable', 'pass')),
      el('p', { id: 'event-description' }, withCode(type.description))),
    el('section', { class: 'card', 'aria-labelledby': 'event-example-title' },
      el('h3', { id: 'event-example-title', text: 'Example body' }),
      el('p', { class: 'hint', text: 'Generated from the schema: the shape and types are exact, the values are made up.' }),
      el('pre', { class: 'body code-block', id: 'event-example', tabindex: '0', text: example })),
    el('section', { class: 'card', 'aria-labelledby': 'event-schema-title' },
      el('h3', { id: 'event-schema-title', text: 'JSON Schema' }),
      el('p', { class: 'hint', text: 'Every property is required and no others are sent. Validate deliveries against it, or generate types from it.' }),
      el('pre', { class: 'body code-block', id: 'event-schema', tabindex: '0', text: schema })));
}
