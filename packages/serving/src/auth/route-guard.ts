// The API-key check of the serving apps' routes, applied once, where an app's table is resolved (`resolveRoutes`,
// which every app of every framework mounts: Express, Koa, Fastify, Hono, Nest), so every route of every app is
// checked the same way and a new route is guarded unless this file's `OPEN_HANDLERS` names its handler: a request
// without a known `Authorization: Bearer <key>` is answered 401 (OpenAI's shape on `/v1/*`, `WWW-Authenticate:
// Bearer`) before its handler runs and before it reaches a batcher.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BatchError } from '@microbatch/core';
import { writeJson } from '@microbatch/core/http';
import { Counter, type Registry } from 'prom-client';
import type { ClientKey } from '../endpoints/client-key.js';
import { writeRouteError } from '../app/route-errors.js';
import type { JsonValueRoute, NodeRoute, RouteHandler } from '../app/route-handlers.js';
import type { ApiKeys } from './api-keys.js';
import { principalOf, setPrincipal } from './principal.js';

/**
 * The handlers of an app once guarded: a fixed JSON answer (the model list) becomes a Node route, so that it can
 * check the request's key.
 */
export type GuardedHandlers<H> = {
  readonly [K in keyof H]: H[K] extends JsonValueRoute ? JsonValueRoute | NodeRoute : H[K];
};

/**
 * The {@link ClientKey} of an app with API keys: `key:<name>` of the key the request was admitted with (each key one
 * fair share, whatever address it comes from); requests of an app without keys fall back to their address.
 *
 * @example
 * ```ts
 * createTextCompletionApp(model, { apiKeys: ['sk-1'], clientKey: apiKeyClientKey }); // the default with keys
 * ```
 */
export const apiKeyClientKey: ClientKey = (req) => {
  const principal = principalOf(req);
  return principal === undefined ? undefined : `key:${principal.keyName}`;
};

/** Counts per key name: its cardinality is the operator's key list, never a client's input. */
function keyMetrics(registry: Registry | undefined) {
  if (registry === undefined) return undefined;
  return {
    accepted: new Counter({
      name: 'microbatch_api_key_requests_total',
      help: 'Requests admitted by API key, labelled by the key name (never the key)',
      labelNames: ['key'] as const,
      registers: [registry],
    }),
    refused: new Counter({
      name: 'microbatch_api_key_refusals_total',
      help: 'Requests refused 401: no Authorization header, another scheme, or an unknown key',
      registers: [registry],
    }),
  };
}

/**
 * A check of `req`'s key against `apiKeys`: `true` (its principal recorded) when it carries one, else `false` once
 * it has been answered 401. The refusal never quotes what the client sent.
 *
 * @example
 * ```ts
 * const check = keyCheck(keys);
 * if (!check(req, res)) return;
 * ```
 */
export function keyCheck(
  apiKeys: ApiKeys,
  registry?: Registry,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const metrics = keyMetrics(registry);
  return (req, res) => {
    if (principalOf(req) !== undefined) return true;
    const header = req.headers.authorization;
    const name = apiKeys.authenticateHeader(header);
    if (name !== undefined) {
      setPrincipal(req, name);
      metrics?.accepted.inc({ key: name });
      return true;
    }
    metrics?.refused.inc();
    const message =
      header === undefined || header.trim() === ''
        ? 'Missing API key: send it as `Authorization: Bearer <key>`'
        : 'Incorrect API key provided';
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    writeRouteError(res, path, new BatchError('UNAUTHORIZED', message));
    return false;
  };
}

/**
 * Who may reach an app's routes: its keys (none: everyone), whether the metrics need one too, and the registry that
 * counts admissions and refusals per key.
 *
 * @example
 * ```ts
 * const access: RouteAccess = { apiKeys: new ApiKeys(['sk-1']), protectMetrics: false, registry };
 * ```
 */
export interface RouteAccess {
  readonly apiKeys: ApiKeys | undefined;
  readonly protectMetrics: boolean;
  readonly registry?: Registry;
}

/**
 * The handlers every app serves without a key, by name (the same names in every table): the probes always, the
 * metrics and the dashboard unless `protectMetrics`. Every other handler requires a key.
 */
const OPEN_HANDLERS: Readonly<Record<string, 'always' | 'unless-protected'>> = {
  liveness: 'always',
  readiness: 'always',
  metrics: 'unless-protected',
  dashboard: 'unless-protected',
};

/**
 * `handlers` guarded as `access` says (see {@link guardHandlers}), the open ones picked by the one table of open
 * handlers: what `resolveRoutes` mounts.
 *
 * @example
 * ```ts
 * guardRoutes({ liveness, completions }, { apiKeys: keys, protectMetrics: false }); // completions needs a key
 * ```
 */
export function guardRoutes<H extends Readonly<Record<string, RouteHandler>>>(
  handlers: H,
  access: RouteAccess,
): GuardedHandlers<H> {
  const open = Object.keys(handlers).filter((name) => {
    const rule = OPEN_HANDLERS[name];
    return rule === 'always' || (rule === 'unless-protected' && !access.protectMetrics);
  });
  return guardHandlers(handlers, access.apiKeys, open as (keyof H & string)[], access.registry);
}

/**
 * `handlers` with every one not named in `open` answering only requests with a known key (see {@link keyCheck});
 * without `apiKeys`, `handlers` as they are.
 *
 * @example
 * ```ts
 * guardHandlers(textCompletionHandlers, keys, ['liveness', 'readiness', 'metrics', 'dashboard'], registry);
 * ```
 */
export function guardHandlers<H extends Readonly<Record<string, RouteHandler>>>(
  handlers: H,
  apiKeys: ApiKeys | undefined,
  open: readonly (keyof H & string)[],
  registry?: Registry,
): GuardedHandlers<H> {
  if (apiKeys === undefined) return handlers as GuardedHandlers<H>;
  const check = keyCheck(apiKeys, registry);
  const guarded: Record<string, RouteHandler> = {};
  for (const [name, route] of Object.entries(handlers)) {
    guarded[name] = open.includes(name) ? route : guard(route, check);
  }
  return guarded as GuardedHandlers<H>;
}

/** `route` answering only what passes `check`. */
function guard(route: RouteHandler, check: (req: IncomingMessage, res: ServerResponse) => boolean): RouteHandler {
  switch (route.kind) {
    case 'node':
      return { kind: 'node', handler: async (req, res) => (check(req, res) ? route.handler(req, res) : undefined) };
    case 'json':
      return {
        kind: 'json',
        handler: async (body, res) => (check(res.req, res) ? route.handler(body, res) : undefined),
      };
    case 'raw':
      return { kind: 'raw', handler: async (req, res) => (check(req, res) ? route.handler(req, res) : undefined) };
    case 'text-query':
      return {
        kind: 'text-query',
        handler: async (text, req, res) => (check(req, res) ? route.handler(text, req, res) : undefined),
      };
    case 'value':
      return {
        kind: 'node',
        handler: (req, res) => {
          if (check(req, res)) writeJson(res, 200, route.body);
          return Promise.resolve();
        },
      };
  }
}
