// The Ray Serve text-generator tutorial as a Hono app on Node (`@hono/node-server`), with the OpenAI completions
// API, health probes and Prometheus metrics. Every route shares ONE service: concurrent requests coalesce into one
// model call. The model runs in Node worker threads, so this app is Node's; `@microbatch/hono` itself is not.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { BatchError } from '@microbatch/core';
import { lingerAfterRefusal } from '@microbatch/core/http';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { batchErrorHandler, batchRoute, errorResponse, jsonBody } from '@microbatch/hono';
import { createHealth, instrumentBatcher, scrapeMetrics } from '@microbatch/prometheus';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
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

/** What `@hono/node-server` puts in `c.env`: the Node request and response. */
interface NodeBindings {
  readonly incoming: IncomingMessage;
  readonly outgoing: ServerResponse;
}

const node = (c: Context): NodeBindings => c.env as NodeBindings;

/**
 * After a 413 for a body it did not read, keeps the connection open while Node discards what the client is still
 * sending (bounded by the server's `requestTimeout`), as core's `lingerAfterRefusal` does on the other frameworks:
 * closing at once resets the connection under a client still sending, and it loses the answer.
 */
const lingerAfter413: MiddlewareHandler = async (c, next) => {
  await next();
  if (c.res.status === 413) lingerAfterRefusal(node(c).outgoing, new BatchError('ITEM_TOO_LARGE', 'refused'));
};

/** `text` as Express and Koa read it: one value, the values of a repeated parameter, or none. */
function textParameter(c: Context): unknown {
  const values = c.req.queries('text');
  return values === undefined ? undefined : values.length === 1 ? values[0] : values;
}

/**
 * The text-completion routes on Hono: `GET /?text=` (plain text), `POST /v1/completions` (OpenAI, JSON or SSE),
 * `GET /v1/models`, `GET /healthz`, `GET /readyz`, `GET /metrics`; another method on these paths is a JSON 405 with
 * `Allow`, anything else a JSON 404. Serve it with `@hono/node-server` (it writes streams to the Node response).
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * serve({ fetch: createTextCompletionApp(model).fetch, port: 8000 });
 * ```
 */
export function createTextCompletionApp(service: TextCompletionService, options: TextCompletionAppOptions = {}): Hono {
  const app = new Hono();
  const post = (path: string, endpoint: NodeJsonEndpoint): void => {
    app.post(path, lingerAfter413, jsonBody(), async (c) => {
      // The endpoint answers (JSON or Server-Sent Events) on the Node response itself.
      await endpoint(c.var.jsonBody, node(c).outgoing);
      return RESPONSE_ALREADY_SENT;
    });
  };

  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  // Hono answers HEAD with the GET route: never run the model for a response without a body.
  app.get(
    '/',
    async (c, next) => (c.req.method === 'HEAD' ? c.body(null, 200, { 'Content-Type': 'text/plain' }) : next()),
    batchRoute({
      batcher: service.generate,
      input: (c) => parseTextQuery(textParameter(c), (body) => service.validate(body)),
      output: (result, c) => c.text(textQueryAnswer(textParameter(c), result)),
      // Each client address gets a fair share of admission and of each batch.
      callOptions: (c) => ({ fairnessKey: node(c).incoming.socket.remoteAddress }),
    }),
  );

  // OpenAI's APIs (JSON or `stream: true`), so existing OpenAI clients work unchanged.
  post('/v1/completions', createCompletionsEndpoint(service, options.limits));
  // What `client.models.list()` of the official OpenAI clients reads.
  const models = modelList(service.id, new Date());
  app.get('/v1/models', (c) => c.json(models));

  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
  app.get('/healthz', (c) => {
    const { status, body } = health.liveness();
    return c.json(body, status as ContentfulStatusCode);
  });
  app.get('/readyz', async (c) => {
    const { status, body } = await health.readiness();
    return c.json(body, status as ContentfulStatusCode);
  });

  // Prometheus metrics of both batchers, as the Express, Koa and Nest apps serve them.
  const registry = new Registry();
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  app.get('/metrics', async (c) => {
    const { status, contentType, body } = await scrapeMetrics(registry);
    return c.body(body, status as ContentfulStatusCode, { 'Content-Type': contentType });
  });

  app.notFound((c) => errorResponse(c, noRoute(c.req.method, c.req.path)));
  app.onError(batchErrorHandler());
  return app;
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
export function startTextCompletionApp(
  service: TextCompletionService,
  where: ListenOptions,
  options: TextCompletionAppOptions = {},
): Promise<RunningServer> {
  // Node discards a refused body itself (as under Express, Koa and Fastify), bounded by the server's
  // `requestTimeout`: @hono/node-server's own clean-up cuts the connection after 500 ms, and a client still sending
  // a large body then loses its 413.
  const listener = getRequestListener(createTextCompletionApp(service, options).fetch, { autoCleanupIncoming: false });
  // The service is the server's lifecycle: its `ready`, `drain` and `close`.
  return startServer((req, res) => void listener(req, res), where, service);
}
