// Moving between pages and signing out; main.js registers the router and sign-out behind these.
import { $ } from './dom.js';

/** `route()` and `signOut(message)` of main.js, registered by `setHandlers`. */
const handlers = {};

/** Called once by main.js, so that no other module needs to import it. */
export function setHandlers(registered) {
  Object.assign(handlers, registered);
}

export function go(hash) {
  if (location.hash === hash) handlers.route();
  else location.hash = hash;
}

/** Clears the status region, then goes to `hash`. (The same as feedback.js's
 * clearStatus, written out here because feedback.js imports this module.) */
export function navigate(hash) {
  $('#status').replaceChildren();
  go(hash);
}

/** Runs the router again: the current page is drawn afresh. */
export const reload = () => handlers.route();

export const signOut = (message) => handlers.signOut(message);
