import type { FastifyReply, FastifyRequest } from 'fastify';
import { batcherForRoute, fromBodyParserError, serveBatched, toHttpError } from '@microbatch/core/http';
import type { Batcher, StreamingBatcher } from '@microbatch/core';
import type {
  BatchedExchange,
  BatchRouteOptions as RouteOptions,
  RequestCallOptions,
  ServerErrorListener,
} from '@microbatch/core/http';
import { errorReporter } from './error-reporter.js';

/**
 * Options of {@link batchRoute}: the route's own hooks, plus either `handler` with any core batcher option (the
 * route creates its batcher) or `batcher` alone (an existing one, configured when it was created). Giving neither,
 * both, or batcher options beside `batcher` does not type-check (and throws a `TypeError` at run time): core's strict
 * `BatchRouteOptions` over this adapter's hooks, as for Express, Koa and Hono. `R` is the request type, for example
 * `FastifyRequest<{ Body: { text: string } }>`.
 *
 * @example
 * ```ts
 * const options: BatchRouteOptions<string, number[], FastifyRequest<{ Body: { text: string } }>> = {
 *   input: (request) => request.body.text,
 *   handler: embed,
 * };
 * ```
 */
export type BatchRouteOptions<I, O, R extends FastifyRequest = FastifyRequest> = RouteOptions<
  I,
  O,
  BatchRouteHooks<I, O, R>
>;

/**
 * The hooks of {@link batchRoute} that do not depend on where its batcher comes from.
 *
 * @example
 * ```ts
 * const hooks: BatchRouteHooks<string, string> = { input: (request) => String(request.query) };
 * ```
 */
export interface BatchRouteHooks<I, O, R extends FastifyRequest = FastifyRequest> {
  /**
   * Turns a request into one handler input. Validate here: a throw answers 400 `INVALID_INPUT` with the error's
   * message (a `BatchError` or an `http-errors` style error keeps its own code and status).
   * @default (request) => request.body
   */
  readonly input?: (request: R) => I | PromiseLike<I>;
  /**
   * Sends one result. Not used when the batcher streams: each value is sent as one Server-Sent Event.
   * @default (result, request, reply) => reply.type('application/json; charset=utf-8').send(JSON.stringify(result ?? null)),
   * so a string result is sent as a JSON string
   */
  readonly output?: (result: O, request: R, reply: FastifyReply) => unknown;
  /**
   * Per-request `priority`, `timeoutMs`, `maxLatencyMs` and `fairnessKey` (a timeout may only lower the batcher's).
   * @default () => ({})
   */
  readonly callOptions?: (request: R) => RequestCallOptions;
  /**
   * Told once about each error this route answers with 500 (a handler that threw or returned a bad result); never
   * about 4xx, 503 or 504 answers. The client only ever sees a generic message.
   * @default (error, request) => request.log.error(error), Fastify's own logger
   */
  readonly onError?: ServerErrorListener;
}

/**
 * A Fastify route handler that batches its requests, with the batcher it uses (for stats, events and `close()`).
 *
 * @example
 * ```ts
 * const route: BatchRouteHandler<string, string> = batchRoute({ handler: generate });
 * app.get('/stats', async () => route.batcher.stats());
 * ```
 */
export interface BatchRouteHandler<I, O, R extends FastifyRequest = FastifyRequest> {
  (request: R, reply: FastifyReply): void;
  readonly batcher: Batcher<I, O> | StreamingBatcher<I, O>;
}

const ROUTE_NAME = 'batchRoute';

/**
 * Creates a Fastify route handler that coalesces concurrent requests into batched handler calls and answers each
 * with its own result, with `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms` headers. Errors are answered as
 * `{"error":{"code","message"}}` with the status from `toHttpError`; a client that disconnects cancels its item; a
 * streaming batcher answers with Server-Sent Events. Register the {@link microbatch} plugin first for JSON bodies
 * read with Fastify's `bodyLimit`, errors in the same shape everywhere and batchers drained on `app.close()`.
 *
 * @example
 * ```ts
 * await app.register(microbatch);
 * app.post('/embed', batchRoute({
 *   input: (request: FastifyRequest<{ Body: { text: string } }>) => request.body.text,
 *   handler: async (texts: string[], { signal }) => model.embed(texts, { signal }),
 *   maxBatchSize: 16,
 * }));
 * ```
 */
export function batchRoute<I, O, R extends FastifyRequest = FastifyRequest>(
  options: BatchRouteOptions<I, O, R>,
): BatchRouteHandler<I, O, R> {
  const report = errorReporter(ROUTE_NAME, options);
  const { onError: _onError, ...routeOptions } = options;
  const batcher = batcherForRoute<I, O>(ROUTE_NAME, routeOptions);
  const { input = defaultInput as (request: R) => I, output, callOptions } = routeOptions;
  const route: Route<I, O, R> = { input, send: output ?? defaultOutput, callOptions, report };

  // Not async: Fastify waits for `reply.send` (or the hijack of a stream), and every failure is answered here.
  function batchRouteHandler(request: R, reply: FastifyReply): void {
    void serveBatched<I, O>(batcher, new FastifyExchange(route, request, reply));
  }
  return Object.defineProperty(batchRouteHandler, 'batcher', {
    value: batcher,
    enumerable: true,
  }) as BatchRouteHandler<I, O, R>;
}

/** What a route does with each request, fixed when the route is made. */
interface Route<I, O, R extends FastifyRequest> {
  readonly input: (request: R) => I | PromiseLike<I>;
  readonly send: (result: O, request: R, reply: FastifyReply) => unknown;
  readonly callOptions: ((request: R) => RequestCallOptions) | undefined;
  readonly report: (error: unknown, request: FastifyRequest) => void;
}

/** One request's exchange: a class, so a request allocates one object rather than a closure per hook. */
class FastifyExchange<I, O, R extends FastifyRequest> implements BatchedExchange<I, O> {
  readonly #route: Route<I, O, R>;
  readonly #request: R;
  readonly #reply: FastifyReply;
  readonly res: FastifyReply['raw'];

  constructor(route: Route<I, O, R>, request: R, reply: FastifyReply) {
    this.#route = route;
    this.#request = request;
    this.#reply = reply;
    this.res = reply.raw;
  }

  readInput(): I | PromiseLike<I> {
    return this.#route.input(this.#request);
  }

  callOptions(): RequestCallOptions | undefined {
    const own = this.#route.callOptions?.(this.#request);
    // A route's `handlerTimeout` is the item's deadline too: it leaves the queue (or its batch) when Fastify gives up.
    const { handlerTimeout } = this.#request.routeOptions;
    if (!(handlerTimeout > 0)) return own;
    const timeoutMs = own?.timeoutMs === undefined ? handlerTimeout : Math.min(own.timeoutMs, handlerTimeout);
    return { ...own, timeoutMs };
  }

  setHeaders(headers: Record<string, string>): void {
    const reply = this.#reply;
    for (const name in headers) reply.header(name, headers[name]);
  }

  send(result: O): unknown {
    // Fastify answered already (its `handlerTimeout` fired): the result has no one to go to.
    if (this.#reply.sent) return undefined;
    return this.#route.send(result, this.#request, this.#reply);
  }

  sendError(error: unknown): void {
    // A complete answer is there already (Fastify's own, when its `handlerTimeout` fired): nothing to add or cut.
    if (this.res.writableEnded) return;
    const mapped = fromBodyParserError(error);
    sendError(this.#reply, mapped);
    this.#route.report(mapped, this.#request);
  }

  beforeStream(): void {
    // The events are written to the Node response directly; Fastify must not send a reply of its own.
    this.#reply.hijack();
    // Headers set through `reply.header()` (the `X-Batch-*` ones) live in Fastify until it sends: copy them over.
    const headers = this.#reply.getHeaders();
    for (const name in headers) {
      const value = headers[name];
      if (value !== undefined) this.res.setHeader(name, value);
    }
  }
}

/**
 * Answers `error` as `{"error":{"code","message"}}` with the status and headers from `toHttpError`, or cuts the
 * response short if part of it was already sent (a half-sent body must not look complete to the client).
 *
 * @example
 * ```ts
 * app.setNotFoundHandler((request, reply) => sendError(reply, routeNotFound(request.method, request.url)));
 * ```
 */
export function sendError(reply: FastifyReply, error: unknown): void {
  if (reply.sent || reply.raw.headersSent) {
    reply.raw.destroy();
    return;
  }
  const { status, headers, body } = toHttpError(error);
  void reply.code(status).headers(headers).type('application/json; charset=utf-8').send(JSON.stringify(body));
}

function defaultInput(request: FastifyRequest): unknown {
  return request.body;
}

function defaultOutput(result: unknown, _request: FastifyRequest, reply: FastifyReply): void {
  // `reply.send(string)` would be sent as text/plain; a result is always JSON.
  void reply.type('application/json; charset=utf-8').send(JSON.stringify(result ?? null));
}
