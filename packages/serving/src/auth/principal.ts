// The principal of a request: which API key it was admitted with, by name. Set by the app's key check before any
// handler runs, read by whatever scopes by caller (fairness keys, the prefix cache's tenant, the Batch API's owners).
import type { IncomingMessage } from 'node:http';

/**
 * Who a request was admitted as.
 *
 * @example
 * ```ts
 * const principal: Principal = { keyName: 'team-a' };
 * ```
 */
export interface Principal {
  /** The name of the API key the request carried (never the key). */
  readonly keyName: string;
}

const PRINCIPALS = new WeakMap<IncomingMessage, Principal>();

/**
 * The principal of `req`: the API key it was admitted with, or `undefined` when the app has no keys (or `req` has
 * not passed the check). Routes that keep what a caller creates (files, batches) store `keyName` as its owner.
 *
 * @example
 * ```ts
 * const owner = principalOf(res.req)?.keyName ?? null;
 * ```
 */
export function principalOf(req: IncomingMessage | undefined): Principal | undefined {
  return req === undefined ? undefined : PRINCIPALS.get(req);
}

/** Records that `req` was admitted with the key named `keyName` (the key check's, once per request). */
export function setPrincipal(req: IncomingMessage, keyName: string): void {
  PRINCIPALS.set(req, { keyName });
}
