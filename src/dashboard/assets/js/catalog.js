// The API's catalogs (permissions, event types), read once and kept until sign-out.
import { listAll } from './api.js';

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

export function clearCatalog() {
  cache = new Map();
}
