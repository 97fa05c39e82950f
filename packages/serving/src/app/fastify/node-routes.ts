// What the Fastify serving apps share: the app with `@microbatch/fastify`'s plugin, routes that answer on the Node
// response itself (the OpenAI endpoints, the probes, metrics and dashboard), and the server they are started on.
import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { type HttpErrorBody, JSON_BODY_LIMIT } from '@microbatch/core/http';
import { microbatch } from '@microbatch/fastify';
import type { NodeHandler } from '@microbatch/prometheus';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import {
  type AppRoute,
  type NodeJsonEndpoint,
  type RawHandler,
  type RouteMethod,
  type TextQueryHandler,
  mountRoutes,
} from '../route-table.js';
import { isOpenAiPath, routeErrorAnswer } from '../route-errors.js';
import { toOpenAiErrorBody } from '../../openai/openai-error.js';
import { type ListenOptions, type RunningServer, type ServerLifecycle, startServer } from '../serve.js';

/** What the other apps log server faults with; Fastify's logger is off here, as the other frameworks log nothing else. */
const logFault = (error: unknown): void => console.error(error);

/**
 * A Fastify app with `@microbatch/fastify`'s plugin (JSON bodies within 64 KiB; body problems (400, 413, 415) and
 * Fastify's own errors as JSON errors with fixed messages, OpenAI's shape on `/v1/*`), `routes` registered after
 * it, and `noRoute`'s 404/405. Fastify answers `HEAD` with each `GET` route (`exposeHeadRoutes`), and routes
 * strictly (case and trailing slash matter), as every framework's app does.
 */
export function createFastifyApp(
  routes: readonly AppRoute[],
  noRoute: (method: string, path: string) => unknown,
  fastifyOptions: FastifyServerOptions = {},
): FastifyInstance {
  const app = Fastify({ bodyLimit: JSON_BODY_LIMIT, ...fastifyOptions });
  void app.register(microbatch, { notFound: false, onError: logFault });
  // Registered after the plugin has loaded, so its JSON parser and error handler apply to every route.
  void app.register(async (scope) => {
    // The plugin answers a refused body (400, 413, 415) before the route runs, in microbatch's shape: on `/v1/*`
    // that answer is turned into OpenAI's, as every framework's app answers there.
    scope.addHook('onSend', async (request, reply, payload) => {
      if (reply.statusCode < 400 || typeof payload !== 'string' || !isOpenAiPath(pathOf(request.url))) return payload;
      return openAiPayload(reply.statusCode, payload);
    });
    mountRoutes(routes, {
      node: (path, handler) => getNode(scope, path, handler),
      json: (path, handler) => postJson(scope, path, handler),
      value: (path, body) => scope.get(path, (_request, reply) => reply.send(body)),
      textQuery: (path, handler) => getTextQuery(scope, path, handler),
      raw: (method, path, handler) => raws.push({ method, path, handler }),
    });
  });
  // Raw routes in a scope of their own with no body parser: the request reaches the handler unread (a multipart
  // upload streamed to disk, a JSON body read by the handler).
  const raws: { method: RouteMethod; path: string; handler: RawHandler }[] = [];
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null));
    for (const { method, path, handler } of raws) {
      scope.route({
        method,
        url: path,
        handler: (request, reply) => {
          reply.hijack();
          return handler(request.raw, reply.raw);
        },
      });
    }
  });
  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request.url);
    const { status, headers, json } = routeErrorAnswer(path, noRoute(request.method, path));
    void reply.code(status).headers(headers).type('application/json; charset=utf-8').send(json);
  });
  return app;
}

/** The path of a request's URL, as sent. */
function pathOf(url: string): string {
  return url.split('?', 1)[0] ?? '/';
}

/** A microbatch-shaped error payload in OpenAI's shape; any other payload as it is. */
function openAiPayload(status: number, payload: string): string {
  let body: unknown;
  try {
    body = JSON.parse(payload);
  } catch {
    return payload;
  }
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (typeof error?.code !== 'string' || typeof error.message !== 'string') return payload;
  return JSON.stringify(toOpenAiErrorBody(status, body as HttpErrorBody));
}

/** `POST path`: the parsed JSON body answered by `endpoint` (JSON or Server-Sent Events) on the Node response. */
function postJson(app: FastifyInstance, path: string, endpoint: NodeJsonEndpoint): void {
  app.post(path, (request, reply) => {
    reply.hijack();
    return endpoint(request.body, reply.raw);
  });
}

/** `GET path`: the `text` query parameter as Fastify parsed it, answered on the Node response. */
function getTextQuery(app: FastifyInstance, path: string, handler: TextQueryHandler): void {
  app.get(path, (request, reply) => {
    reply.hijack();
    return handler((request.query as { text?: unknown }).text, request.raw, reply.raw);
  });
}

/**
 * `GET path` answered by a Node handler of @microbatch/prometheus (probes, metrics, dashboard): the same bytes and
 * headers (`Cache-Control: no-store`) as on Express, Koa and Nest.
 */
function getNode(app: FastifyInstance, path: string, handler: NodeHandler): void {
  app.get(path, (request, reply) => {
    reply.hijack();
    return handler(request.raw, reply.raw);
  });
}

/**
 * Starts the app `create` makes on `startServer`'s Node server (the same timeouts and limits as the other
 * frameworks' apps): Fastify does the routing only. `lifecycle` is the server's: its `ready`, `drain` and `close`.
 */
export async function startFastify(
  create: (fastifyOptions: FastifyServerOptions) => FastifyInstance,
  where: ListenOptions,
  lifecycle: ServerLifecycle,
): Promise<RunningServer> {
  let handler: RequestListener | undefined;
  const app = create({
    serverFactory: (fastifyHandler) => {
      handler = fastifyHandler;
      return createServer();
    },
  });
  await app.ready();
  const route = handler as RequestListener;
  return startServer((req: IncomingMessage, res: ServerResponse) => route(req, res), where, lifecycle);
}
