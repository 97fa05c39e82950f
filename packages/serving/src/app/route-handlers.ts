// The handlers of the serving apps' routes, tagged with how a framework mounts each (a Node handler, a JSON
// endpoint, a fixed JSON answer, the `GET /?text=` handler, a raw handler): what an app's table names and what the
// API-key guard wraps. The tables and their mounting: `route-table.ts`, which re-exports these.
import type { IncomingMessage, ServerResponse } from 'node:http';
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

/**
 * A handler of the raw Node request and response, for any method: it reads the body itself (a multipart upload
 * streamed to disk, never buffered whole), so a framework must hand the request over unread. Its path may have
 * `{param}` segments (`/v1/files/{file_id}`), read with {@link pathParams}.
 */
export type RawHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** A route whose handler reads the raw request (the Files and Batch APIs). */
export interface RawRoute {
  readonly kind: 'raw';
  readonly handler: RawHandler;
}

/** A handler, tagged with how a framework mounts it. */
export type RouteHandler = NodeRoute | JsonRoute | JsonValueRoute | TextQueryRoute | RawRoute;

/** Tags a `(req, res)` handler (probes, metrics, dashboard, model list). */
export const nodeRoute = (handler: NodeHandler): NodeRoute => ({ kind: 'node', handler });
/** Tags a JSON endpoint (the OpenAI endpoints). */
export const jsonRoute = (handler: NodeJsonEndpoint): JsonRoute => ({ kind: 'json', handler });
/** Tags the `GET /?text=` handler. */
export const textQueryRoute = (handler: TextQueryHandler): TextQueryRoute => ({ kind: 'text-query', handler });

/** Tags a fixed JSON answer (the model list). */
export const jsonValueRoute = (body: unknown): JsonValueRoute => ({ kind: 'value', body });

/** Tags a raw handler (the Files and Batch APIs). */
export const rawRoute = (handler: RawHandler): RawRoute => ({ kind: 'raw', handler });

/**
 * Tags every raw handler of a record (the Batch API's handlers).
 *
 * @example
 * ```ts
 * const routes = rawRoutes({ getFile: (req, res) => answer(req, res) }); // { getFile: { kind: 'raw', handler } }
 * ```
 */
export function rawRoutes<Name extends string>(handlers: Readonly<Record<Name, RawHandler>>): Record<Name, RawRoute> {
  const routes = {} as Record<Name, RawRoute>;
  for (const name of Object.keys(handlers) as Name[]) routes[name] = rawRoute(handlers[name]);
  return routes;
}
