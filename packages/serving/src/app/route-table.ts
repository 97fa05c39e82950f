// The serving apps' routes as data: one table per app (method, path, which handler), the handlers made once per
// service, and a framework's app mounting them with three small functions of its own. A route is added here, in the
// table, and every framework serves it, with the same 405 (`Allow`) / 404 for what it does not answer.
import type { BatchError } from '@microbatch/core';
import type { NodeHandler } from '@microbatch/prometheus';
import type { TextQueryHandler } from '../endpoints/text-query-route.js';
import type { NodeJsonEndpoint } from '../endpoints/openai-endpoint.js';

export type { NodeJsonEndpoint, TextQueryHandler };

/** A `(req, res)` handler of a `GET` route (probes, metrics, dashboard, model list). */
export interface NodeRoute {
  readonly kind: 'node';
  readonly handler: NodeHandler;
}

/** A JSON endpoint of a `POST` route (the OpenAI endpoints). */
export interface JsonRoute {
  readonly kind: 'json';
  readonly handler: NodeJsonEndpoint;
}

/**
 * A `GET` route answering a fixed JSON value (the model list), sent the framework's own way, so that it needs no
 * Node response (Hono's `app.request()` reaches it too).
 */
export interface JsonValueRoute {
  readonly kind: 'value';
  readonly body: unknown;
}

/** The `GET /?text=` handler. */
export interface TextQueryRoute {
  readonly kind: 'text-query';
  readonly handler: TextQueryHandler;
}

/** A handler, tagged with how a framework mounts it. */
export type RouteHandler = NodeRoute | JsonRoute | JsonValueRoute | TextQueryRoute;

/**
 * One row of an app's route table: `GET` routes answer `HEAD` too (without a body); `POST` routes take a JSON body
 * (64 KiB at most, read by the framework adapter's `jsonBody`).
 */
export interface RouteRow<Name extends string = string> {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly handler: Name;
}

/** A row with its handler: what a framework mounts. */
export type AppRoute = { readonly method: 'GET' | 'POST'; readonly path: string } & RouteHandler;

/** What answers a request no route matched: `unmatchedRoute` over the app's table (405 with `Allow`, else 404). */
export type NoRoute = (method: string, path: string) => BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'>;

/** How one framework mounts each kind of route. */
export interface RouteMounts {
  /** `GET path` (and `HEAD`) answered by a Node handler. */
  readonly node: (path: string, handler: NodeHandler) => void;
  /** `POST path` with a JSON body answered on the Node response. */
  readonly json: (path: string, handler: NodeJsonEndpoint) => void;
  /** `GET path` (and `HEAD`) answered with `body` as JSON. */
  readonly value: (path: string, body: unknown) => void;
  /** `GET path` (and `HEAD`) with the `text` query parameter as the framework reads it. */
  readonly textQuery: (path: string, handler: TextQueryHandler) => void;
}

/** Tags a `(req, res)` handler (probes, metrics, dashboard, model list). */
export const nodeRoute = (handler: NodeHandler): NodeRoute => ({ kind: 'node', handler });
/** Tags a JSON endpoint (the OpenAI endpoints). */
export const jsonRoute = (handler: NodeJsonEndpoint): JsonRoute => ({ kind: 'json', handler });
/** Tags the `GET /?text=` handler. */
export const textQueryRoute = (handler: TextQueryHandler): TextQueryRoute => ({ kind: 'text-query', handler });

/** Tags a fixed JSON answer (the model list). */
export const jsonValueRoute = (body: unknown): JsonValueRoute => ({ kind: 'value', body });

const METHOD_OF_KIND = { node: 'GET', json: 'POST', value: 'GET', 'text-query': 'GET' } as const;

/**
 * The table's rows with their handlers, in the table's order. A row whose method is not its handler's (a `POST`
 * row for a probe) throws: the table and the handlers are the package's own, so that is a bug caught at startup.
 *
 * @example
 * ```ts
 * resolveRoutes([{ method: 'GET', path: '/healthz', handler: 'liveness' }], { liveness: nodeRoute(probe) });
 * ```
 */
export function resolveRoutes<Name extends string>(
  table: readonly RouteRow<Name>[],
  handlers: Readonly<Record<Name, RouteHandler>>,
): AppRoute[] {
  return table.map((row) => {
    const handler: RouteHandler = handlers[row.handler];
    if (METHOD_OF_KIND[handler.kind] !== row.method) {
      throw new Error(`Route ${row.method} ${row.path}: its handler \`${row.handler}\` answers ${handler.kind}`);
    }
    return { method: row.method, path: row.path, ...handler };
  });
}

/**
 * Mounts every route with the framework's own `mounts`, in order.
 *
 * @example
 * ```ts
 * mountRoutes(routes, { node: (path, h) => app.get(path, h), json: ..., textQuery: ... });
 * ```
 */
export function mountRoutes(routes: readonly AppRoute[], mounts: RouteMounts): void {
  for (const route of routes) {
    if (route.kind === 'node') mounts.node(route.path, route.handler);
    else if (route.kind === 'json') mounts.json(route.path, route.handler);
    else if (route.kind === 'value') mounts.value(route.path, route.body);
    else mounts.textQuery(route.path, route.handler);
  }
}

/**
 * Path → the methods a table answers there, HEAD beside each GET: what `unmatchedRoute` turns into 405 / 404.
 *
 * @example
 * ```ts
 * allowedMethods([{ method: 'GET', path: '/healthz', handler: 'liveness' }]); // { '/healthz': ['GET', 'HEAD'] }
 * ```
 */
export function allowedMethods(table: readonly RouteRow[]): Readonly<Record<string, readonly string[]>> {
  const methods: Record<string, string[]> = {};
  for (const { method, path } of table) {
    const list = (methods[path] ??= []);
    list.push(...(method === 'GET' ? ['GET', 'HEAD'] : [method]));
  }
  return methods;
}
