// The Ray Serve text-generator tutorial as a Fastify app, with the OpenAI completions API, health probes and
// Prometheus metrics. Every route shares ONE service: concurrent requests coalesce into one model call.
import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { JSON_BODY_LIMIT } from '@microbatch/core/http';
import { batchRoute, microbatch, sendError } from '@microbatch/fastify';
import { createHealth, instrumentBatcher, scrapeMetrics } from '@microbatch/prometheus';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { Registry } from 'prom-client';
import type { TextCompletionAppOptions } from '../app-options.js';
import { createCompletionsEndpoint } from '../completions-endpoint.js';
import { noRoute } from '../routes.js';
import { modelList } from '../models-endpoint.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { parseTextQuery, textQueryAnswer } from '../text-query.js';

/** An endpoint that answers a parsed JSON body on the Node response itself (the OpenAI endpoints). */
type NodeJsonEndpoint = (body: unknown, res: ServerResponse) => Promise<void>;

// What the other apps log server faults with; Fastify's logger is off here, as the other frameworks log nothing else.
const logFault = (error: unknown): void => console.error(error);

/**
 * The text-completion routes on Fastify: `GET /?text=` (plain text), `POST /v1/completions` (OpenAI, JSON or SSE),
 * `GET /v1/models`, `GET /healthz`, `GET /readyz`, `GET /metrics`; another method on these paths is a JSON 405 with
 * `Allow`, anything else a JSON 404. Bodies are read by `@microbatch/fastify`'s plugin within a 64 KiB `bodyLimit`.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * await createTextCompletionApp(model).listen({ port: 8000 });
 * ```
 */
export function createTextCompletionApp(
  service: TextCompletionService,
  options: TextCompletionAppOptions = {},
  fastifyOptions: FastifyServerOptions = {},
): FastifyInstance {
  const app = Fastify({ bodyLimit: JSON_BODY_LIMIT, ...fastifyOptions });
  // Body problems (400, 413, 415) and Fastify's own errors as JSON errors with fixed messages; the 404/405 is ours.
  void app.register(microbatch, { notFound: false, onError: logFault });
  // Registered after the plugin has loaded, so its JSON parser and error handler apply to every route.
  void app.register(async (scope) => {
    routes(scope, service, options);
  });
  app.setNotFoundHandler((request, reply) => {
    sendError(reply, noRoute(request.method, request.url.split('?', 1)[0] ?? '/'));
  });
  return app;
}

function routes(app: FastifyInstance, service: TextCompletionService, options: TextCompletionAppOptions): void {
  const post = (path: string, endpoint: NodeJsonEndpoint): void => {
    app.post(path, (request, reply) => {
      // The endpoint answers (JSON or Server-Sent Events) on the Node response itself.
      reply.hijack();
      return endpoint(request.body, reply.raw);
    });
  };

  // Fastify would answer HEAD with the GET route: never run the model for a response without a body.
  app.head('/', (_request, reply) => reply.type('text/plain').send());
  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  app.get(
    '/',
    batchRoute({
      batcher: service.generate,
      input: (request) => parseTextQuery((request.query as { text?: unknown }).text, (body) => service.validate(body)),
      output: (result, request, reply) =>
        reply.type('text/plain').send(textQueryAnswer((request.query as { text?: unknown }).text, result)),
      // Each client address gets a fair share of admission and of each batch.
      callOptions: (request) => ({ fairnessKey: request.socket.remoteAddress }),
      onError: logFault,
    }),
  );

  // OpenAI's APIs (JSON or `stream: true`), so existing OpenAI clients work unchanged.
  post('/v1/completions', createCompletionsEndpoint(service, options.limits));
  // What `client.models.list()` of the official OpenAI clients reads.
  const models = modelList(service.id, new Date());
  app.get('/v1/models', (_request, reply) => reply.send(models));

  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
  app.get('/healthz', (_request, reply) => {
    const { status, body } = health.liveness();
    return reply.code(status).send(body);
  });
  app.get('/readyz', async (_request, reply) => {
    const { status, body } = await health.readiness();
    return reply.code(status).send(body);
  });

  // Prometheus metrics of both batchers, as the Express, Koa and Nest apps serve them.
  const registry = new Registry();
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  app.get('/metrics', async (_request, reply) => {
    const { status, contentType, body } = await scrapeMetrics(registry);
    return reply.code(status).type(contentType).send(body);
  });
}

/**
 * Listens with {@link createTextCompletionApp} at once (readiness says when the service can serve); `shutdown`
 * stops accepting, drains the service's batchers, waits for the responses, then closes the service. The app is
 * served by the same Node server (timeouts, limits) as the other frameworks' apps.
 *
 * @example
 * ```ts
 * const running = await startTextCompletionApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export async function startTextCompletionApp(
  service: TextCompletionService,
  where: ListenOptions,
  options: TextCompletionAppOptions = {},
): Promise<RunningServer> {
  let handler: RequestListener | undefined;
  const app = createTextCompletionApp(service, options, {
    // Fastify's routing only: the server with the project's timeouts and limits is `startServer`'s.
    serverFactory: (fastifyHandler) => {
      handler = fastifyHandler;
      return createServer();
    },
  });
  await app.ready();
  const route = handler as RequestListener;
  // The service is the server's lifecycle: its `ready`, `drain` and `close`.
  return startServer((req: IncomingMessage, res: ServerResponse) => route(req, res), where, service);
}
