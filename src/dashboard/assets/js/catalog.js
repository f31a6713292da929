// The API's catalogs (permissions, event types, audit actions), read once and kept until sign-out.
import { api, listAll } from './api.js';

let cache = new Map();

/** Every item of the paged list at `path`, read at most once until `clearCatalog()`. */
async function cached(path) {
  const store = cache;
  if (!store.has(path)) store.set(path, await listAll(path));
  return store.get(path);
}

/** `GET /permissions`: `{key, domain, verb, sensitive}` in the seed's order. */
export const permissions = () => cached('/permissions');

/** `GET /event-types`: `{id, description, schema}` in the seed's order, test.preflight last. */
export const eventTypes = () => cached('/event-types');

/** The audit log's actions, as the OpenAPI document (`AuditAction`) lists them. */
export async function auditActions() {
  const store = cache;
  if (!store.has('audit-actions')) {
    const document = (await api('GET', '/openapi.json')).data;
    const schema = ((document.components || {}).schemas || {}).AuditAction || {};
    store.set('audit-actions', Array.isArray(schema.enum) ? schema.enum : []);
  }
  return store.get('audit-actions');
}

export function clearCatalog() {
  cache = new Map();
}
