// What the Hono serving apps share on `@hono/node-server`: routes that answer on the Node response itself (the
// OpenAI endpoints, the probes, metrics and dashboard), and the Node listener they are served by.
import { type IncomingMessage, type RequestListener, ServerResponse } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { BatchError } from '@microbatch/core';
import { lingerAfterRefusal, serverErrorReporter } from '@microbatch/core/http';
import { batchErrorHandler, hasBody, readJsonBody } from '@microbatch/hono';
import type { NodeHandler } from '@microbatch/prometheus';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import {
  type AppRoute,
  type NoRoute,
  type NodeJsonEndpoint,
  type RawHandler,
  type RouteMethod,
  type TextQueryHandler,
  mountRoutes,
} from '../route-table.js';
import { isOpenAiPath, routeErrorAnswer } from '../route-errors.js';
import { requestPath } from '../text-completion-routes.js';

/** What `@hono/node-server` puts in `c.env`: the Node request and response. */
interface NodeBindings {
  readonly incoming: IncomingMessage;
  readonly outgoing: ServerResponse;
}

/** The Node request and response under `c` (the app is served by `@hono/node-server`). */
export const node = (c: Context): NodeBindings => c.env as NodeBindings;

/**
 * After a 413 for a body it did not read, keeps the connection open while Node discards what the client is still
 * sending (bounded by the server's `requestTimeout`), as core's `lingerAfterRefusal` does on the other frameworks:
 * closing at once resets the connection under a client still sending, and it loses the answer.
 */
const lingerAfter413: MiddlewareHandler = async (c, next) => {
  await next();
  if (c.res.status === 413) lingerAfterRefusal(node(c).outgoing, new BatchError('ITEM_TOO_LARGE', 'refused'));
};

/**
 * The JSON body (64 KiB at most) of an OpenAI route into `jsonBody`, as `@microbatch/hono`'s `jsonBody()` reads it,
 * a refused one (400, 413, 415) answered in OpenAI's shape, as every framework's app answers there.
 */
const openAiJsonBody: MiddlewareHandler = async (c, next) => {
  if (hasBody(c.req.raw) && c.get('jsonBody') === undefined) {
    try {
      c.set('jsonBody', await readJsonBody(c.req.raw));
    } catch (error) {
      return routeErrorResponse(c, c.req.path, error);
    }
  }
  await next();
};

/**
 * A Hono app serving `routes` on `@hono/node-server`, `noRoute`'s 404 / 405 for anything else, errors as JSON
 * (OpenAI's shape on `/v1/*`). Hono answers `HEAD` with each `GET` route, without the body, and routes strictly
 * (case and trailing slash matter), as every framework's app does.
 */
export function honoApp(routes: readonly AppRoute[], noRoute: NoRoute): Hono {
  const app = new Hono();
  // Hono routes the URL as `new URL()` resolved it (`/v1/../healthz` is `/healthz` there); the path as sent that
  // differs matches no route, a 404 as on Express and Koa.
  // (Only on `@hono/node-server`: `app.request()` and other runtimes have no Node request to read.)
  app.use(async (c, next) => {
    const incoming = (c.env as Partial<NodeBindings> | undefined)?.incoming;
    const sent = incoming === undefined ? c.req.path : requestPath(incoming.url);
    return sent === c.req.path ? next() : routeErrorResponse(c, sent, noRoute(c.req.method, sent));
  });
  mountRoutes(routes, {
    node: (path, handler) => getNode(app, path, handler),
    json: (path, handler) => postJson(app, path, handler),
    value: (path, body) => app.get(path, (c) => c.json(body)),
    textQuery: (path, handler) => getTextQuery(app, path, handler),
    raw: (method, path, handler) => rawRoute(app, method, path, handler),
  });
  app.notFound((c) => routeErrorResponse(c, c.req.path, noRoute(c.req.method, c.req.path)));
  const onError = batchErrorHandler();
  const report = serverErrorReporter((error) => console.error(error));
  // A refused body (400, 413, 415) on `/v1/*` in OpenAI's shape, as every framework's app answers there.
  app.onError((error, c) => {
    if (!isOpenAiPath(c.req.path)) return onError(error, c);
    report(error);
    return routeErrorResponse(c, c.req.path, error);
  });
  return app;
}

/** `error` in the shape the app answers on `path` (OpenAI's on `/v1/*`), as a Hono response. */
function routeErrorResponse(c: Context, path: string, error: unknown): Response {
  const { status, headers, json } = routeErrorAnswer(path, error);
  return c.body(json, status as ContentfulStatusCode, {
    ...headers,
    'Content-Type': 'application/json; charset=utf-8',
  });
}

/** `text` as Express and Koa read it: one value, the values of a repeated parameter, or none. */
function textParameter(c: Context): unknown {
  const values = c.req.queries('text');
  return values === undefined ? undefined : values.length === 1 ? values[0] : values;
}

/**
 * `GET path`: the `text` query parameter (as Express and Koa read it) answered on the Node response. `HEAD` is
 * answered here, the Hono way: Hono answers it with a copy of the GET route's response, which must not have been
 * written to the Node response already.
 */
function getTextQuery(app: Hono, path: string, handler: TextQueryHandler): void {
  app.get(path, async (c) => {
    // HEAD through the handler too (it answers at once, without the model), so that it checks an API key as on
    // the other frameworks.
    if (c.req.method === 'HEAD')
      return await headResponse((req, res) => handler(undefined, req, res), node(c).incoming);
    await handler(textParameter(c), node(c).incoming, node(c).outgoing);
    return RESPONSE_ALREADY_SENT;
  });
}

/** `POST path`: the JSON body (64 KiB at most) answered by `endpoint` on the Node response. */
function postJson(app: Hono, path: string, endpoint: NodeJsonEndpoint): void {
  app.post(path, lingerAfter413, openAiJsonBody, async (c) => {
    await endpoint(c.get('jsonBody'), node(c).outgoing);
    return RESPONSE_ALREADY_SENT;
  });
}

/**
 * `method path` answered by a raw handler on the Node request (its body unread: Hono reads it only when asked) and
 * response; `HEAD` of a `GET` route the Hono way, as {@link getNode}'s.
 */
function rawRoute(app: Hono, method: RouteMethod, path: string, handler: RawHandler): void {
  app.on(method, path, async (c) => {
    const { incoming, outgoing } = node(c);
    if (c.req.method === 'HEAD') return await headResponse(handler, incoming);
    await handler(incoming, outgoing);
    return RESPONSE_ALREADY_SENT;
  });
}

/**
 * `GET path` answered by a Node handler of @microbatch/prometheus (probes, metrics, dashboard): the same bytes and
 * headers (`Cache-Control: no-store`) as on Express, Koa and Nest.
 */
function getNode(app: Hono, path: string, handler: NodeHandler): void {
  app.get(path, async (c) => {
    const { incoming, outgoing } = node(c);
    if (c.req.method === 'HEAD') return await headResponse(handler, incoming);
    await handler(incoming, outgoing);
    return RESPONSE_ALREADY_SENT;
  });
}

/**
 * `HEAD` of a Node handler's route, answered the Hono way: Hono answers `HEAD` with a copy of the `GET` route's
 * `Response`, and `@hono/node-server` writes that copy's headers even when the route had answered on the Node
 * response itself (`ERR_HTTP_HEADERS_SENT`). So the handler writes to a response of its own, not sent, and its
 * status and headers (`Content-Length` included, as `GET` would send) become the `Response`.
 */
async function headResponse(handler: NodeHandler, incoming: IncomingMessage): Promise<Response> {
  const captured = new ServerResponse(incoming);
  await handler(incoming, captured);
  const headers = new Headers();
  for (const [name, value] of Object.entries(captured.getHeaders())) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, String(one));
  }
  return new Response(null, { status: captured.statusCode, headers });
}

/**
 * The Node listener serving `app`. Node discards a refused body itself (as under Express, Koa and Fastify), bounded
 * by the server's `requestTimeout`: @hono/node-server's own clean-up cuts the connection after 500 ms, and a client
 * still sending a large body then loses its 413.
 */
export function nodeListener(app: Hono): RequestListener {
  const listener = getRequestListener(app.fetch, { autoCleanupIncoming: false });
  return (req, res) => void listener(req, res);
}
