import { AsyncLocalStorage } from 'node:async_hooks';
import type { DispatchInfo } from '@microbatch/core';
import type { BatchTarget } from './batch.types.js';

/**
 * What `BatchInterceptor` hands to the batched method for one request. Pipes run inside `next.handle()`, after the
 * interceptor, so the method wrapper is the first place that sees the request's validated arguments; it learns
 * about the request (its signal, where its headers go) from this scope.
 */
export interface RequestScope {
  /** The request object, so that an interceptor applied twice to one route steps aside the second time. */
  readonly request: unknown;
  /** The batched route this scope is for: only its wrapper may claim it. */
  readonly target: BatchTarget;
  /** Aborts when the response no longer wants a result (client gone, interceptor chain torn down). */
  readonly signal: AbortSignal;
  /** Sets the `X-Batch-*` headers once the request's batch is dispatched. */
  readonly onDispatch: (info: DispatchInfo) => void;
  claimed: boolean;
}

/**
 * Nest binds `next.handle()` to the async context it is called in, so a store set around that call reaches the
 * route handler (after guards, interceptors and pipes).
 */
export const requestScopes = new AsyncLocalStorage<RequestScope>();

/**
 * The scope for `target`, once: the batch method itself runs in the async context of whichever request triggered
 * its dispatch, and a batched route it calls directly must not mistake that request for its own.
 */
export function claimRequestScope(target: BatchTarget): RequestScope | undefined {
  const scope = requestScopes.getStore();
  if (scope === undefined || scope.target !== target || scope.claimed) return undefined;
  scope.claimed = true;
  return scope;
}
