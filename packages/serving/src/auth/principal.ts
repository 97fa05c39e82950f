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

/**
 * The owner of what `req` creates in the Files and Batch APIs: its API key's name, `undefined` without keys (one
 * space for all). Passed as the Batch API's `principal` by the apps.
 *
 * @example
 * ```ts
 * createTextCompletionBatchApi(service, { dataDir, principal: batchOwner }, limits, errors);
 * ```
 */
export function batchOwner(req: IncomingMessage): string | undefined {
  return PRINCIPALS.get(req)?.keyName;
}

/** Records that `req` was admitted with the key named `keyName` (the key check's, once per request). */
export function setPrincipal(req: IncomingMessage, keyName: string): void {
  PRINCIPALS.set(req, { keyName });
}

/**
 * The prefix cache's tenant of `req`: `key:<name>` of its API key (whatever the fairness key is), else its fairness
 * key; `''` (one cache for all) when the app shares it. Prompts of different tenants never reuse each other's
 * cached blocks, so no client learns from `cached_tokens` or its time to first token what another sent.
 *
 * @example
 * ```ts
 * prefixCacheTenant(req, '127.0.0.2', false); // '127.0.0.2' without keys
 * ```
 */
export function prefixCacheTenant(
  req: IncomingMessage | undefined,
  fairnessKey: string | undefined,
  shared: boolean,
): string {
  if (shared) return '';
  const principal = principalOf(req);
  return principal === undefined ? (fairnessKey ?? '') : `key:${principal.keyName}`;
}
