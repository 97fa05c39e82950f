// The serving apps' routes as data: one table per app (method, path, which handler), the handlers made once per
// service, and a framework's app mounting them with three small functions of its own. A route is added here, in the
// table, and every framework serves it, with the same 405 (`Allow`) / 404 for what it does not answer.
import type { BatchError } from '@microbatch/core';
import { methodNotAllowed, routeNotFound } from '@microbatch/core/http';
import type { NodeHandler } from '@microbatch/prometheus';
import { type RouteAccess, guardRoutes } from '../auth/route-guard.js';
import type { NodeJsonEndpoint, RawHandler, RouteHandler, TextQueryHandler } from './route-handlers.js';

export type {
  JsonRoute,
  JsonValueRoute,
  NodeJsonEndpoint,
  NodeRoute,
  RawHandler,
  RawRoute,
  RouteHandler,
  TextQueryHandler,
  TextQueryRoute,
} from './route-handlers.js';
export { jsonRoute, jsonValueRoute, nodeRoute, rawRoute, rawRoutes, textQueryRoute } from './route-handlers.js';

/**
 * One row of an app's route table: `GET` routes answer `HEAD` too (without a body); `POST` routes take a JSON body
 * (64 KiB at most, read by the framework adapter's `jsonBody`).
 */
export interface RouteRow<Name extends string = string> {
  readonly method: RouteMethod;
  readonly path: string;
  readonly handler: Name;
}

/** The methods a row may answer (`DELETE` only with a raw handler). */
export type RouteMethod = 'GET' | 'POST' | 'DELETE';

/**
 * An app's handlers, by the names its table uses, and who may reach them: what {@link resolveRoutes} takes, so that no
 * app's routes are resolved without their key check.
 */
export interface AppHandlers<Name extends string = string> {
  readonly handlers: Readonly<Record<Name, RouteHandler>>;
  readonly access: RouteAccess;
}

/** A row with its handler: what a framework mounts. */
export type AppRoute = { readonly method: RouteMethod; readonly path: string } & RouteHandler;

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
  /**
   * `method path` (and `HEAD` with `GET`) answered by a raw handler, the request's body unread. `path` is in the
   * `:param` form every framework here routes (`/v1/files/:file_id`).
   */
  readonly raw: (method: RouteMethod, path: string, handler: RawHandler) => void;
}

const METHOD_OF_KIND = { node: 'GET', json: 'POST', value: 'GET', 'text-query': 'GET', raw: undefined } as const;

/**
 * The table's rows with their handlers, in the table's order, each guarded by the app's API keys here, the one
 * place every framework's app gets its routes from (the probes, and the metrics unless `protectMetrics`, stay open:
 * `guardRoutes`). A row whose method is not its handler's (a `POST` row for a probe) throws: the table and the
 * handlers are the package's own, so that is a bug caught at startup.
 *
 * @example
 * ```ts
 * resolveRoutes([{ method: 'GET', path: '/healthz', handler: 'liveness' }], {
 *   handlers: { liveness: nodeRoute(probe) },
 *   access: { apiKeys: undefined, protectMetrics: false },
 * });
 * ```
 */
export function resolveRoutes<Name extends string>(
  table: readonly RouteRow<Name>[],
  app: AppHandlers<Name>,
): AppRoute[] {
  const handlers: Readonly<Record<string, RouteHandler>> = guardRoutes(app.handlers, app.access);
  return table.map((row) => {
    const handler = handlers[row.handler] as RouteHandler;
    const method = METHOD_OF_KIND[handler.kind];
    if (method !== undefined && method !== row.method) {
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
    else if (route.kind === 'raw') mounts.raw(route.method, colonPath(route.path), route.handler);
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

/** `/v1/files/{file_id}` as the frameworks route it: `/v1/files/:file_id`. */
export function colonPath(path: string): string {
  return path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1');
}

/** A row path with `{param}` segments as a regular expression over a request's path (a segment: no `/`). */
function patternOf(path: string): RegExp {
  const source = path
    .split(/(\{[A-Za-z_][A-Za-z0-9_]*\})/)
    .map((part) =>
      part.startsWith('{') ? `(?<${part.slice(1, -1)}>[^/]+)` : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${source}$`);
}

/**
 * The `{param}` values of a request URL's path under a row's `path` (decoded); `{}` when it does not match.
 *
 * @example
 * ```ts
 * pathParams('/v1/files/{file_id}', '/v1/files/file-abc'); // { file_id: 'file-abc' }
 * ```
 */
export function pathParams(path: string, url: string | undefined): Record<string, string> {
  const sent = (url ?? '/').split('?', 1)[0] ?? '/';
  const groups = patternOf(path).exec(sent)?.groups ?? {};
  const params: Record<string, string> = {};
  for (const [name, value] of Object.entries(groups)) {
    try {
      params[name] = decodeURIComponent(value);
    } catch {
      params[name] = value;
    }
  }
  return params;
}

/**
 * The key of `routes` (an {@link allowedMethods} table, whose paths may have `{param}` segments) that `path` is,
 * exactly or by its parameters; `undefined` when none.
 *
 * @example
 * ```ts
 * routeKeyOf({ '/v1/files/{file_id}': ['GET'] }, '/v1/files/file-1'); // '/v1/files/{file_id}'
 * ```
 */
export function routeKeyOf(routes: Readonly<Record<string, readonly string[]>>, path: string): string | undefined {
  if (Object.hasOwn(routes, path)) return path;
  return Object.keys(routes).find((key) => key.includes('{') && patternOf(key).test(path));
}

/**
 * The 404, or the 405 with `Allow` when `routes` knows `path` (exactly or by its `{param}` segments): core's
 * `unmatchedRoute` for tables with parameters.
 *
 * @example
 * ```ts
 * unmatchedTableRoute('PUT', '/v1/files/file-1', { '/v1/files/{file_id}': ['GET', 'HEAD', 'DELETE'] }); // 405
 * ```
 */
export function unmatchedTableRoute(
  method: string,
  path: string,
  routes: Readonly<Record<string, readonly string[]>>,
): BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'> {
  const key = routeKeyOf(routes, path);
  const allowed = key === undefined ? undefined : routes[key];
  return allowed === undefined ? routeNotFound(method, path) : methodNotAllowed(method, path, allowed);
}
