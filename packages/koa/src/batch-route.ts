import type { Next, ParameterizedContext } from 'koa';
import { BatchError, ErrorCode } from '@microbatch/core';
import { batcherForRoute, hasBody, serveBatched } from '@microbatch/core/http';
import type { Batcher, StreamingBatcher } from '@microbatch/core';
import type {
  BatchedExchange,
  BatchRouteOptions as RouteOptions,
  RequestCallOptions,
  ServerErrorListener,
} from '@microbatch/core/http';
import { errorReporter, sendError } from './error-handler.js';

/**
 * Options of {@link batchRoute}: the route's own hooks, plus either `handler` with any core batcher option (the
 * route creates its batcher) or `batcher` alone (an existing one, configured when it was created). Giving neither,
 * both, or batcher options beside `batcher` does not type-check (and throws a `TypeError` at run time). `C` is the
 * context type, for example `RouterContext` from `@koa/router`.
 *
 * @example
 * ```ts
 * const options: BatchRouteOptions<string, string, RouterContext> = { input: (ctx) => ctx.params.prompt, handler: generate };
 * ```
 */
export type BatchRouteOptions<I, O, C extends ParameterizedContext = ParameterizedContext> = RouteOptions<
  I,
  O,
  BatchRouteHooks<I, O, C>
>;

/**
 * The hooks of {@link batchRoute} that do not depend on where its batcher comes from.
 *
 * @example
 * ```ts
 * const hooks: BatchRouteHooks<string, string> = { input: (ctx) => String(ctx.query.prompt) };
 * ```
 */
export interface BatchRouteHooks<I, O, C extends ParameterizedContext = ParameterizedContext> {
  /**
   * Turns a request into one handler input. Validate here: a throw answers 400 `INVALID_INPUT` with the error's
   * message (a `BatchError` or an `http-errors` error, such as `ctx.throw(415)`, keeps its own code and status).
   * @default (ctx) => ctx.request.body, and a 400 naming `jsonBody()` where it is `undefined` (no body, or none read)
   */
  readonly input?: (ctx: C) => I | PromiseLike<I>;
  /**
   * Sends one result. Not used when the batcher streams: each value is sent as one Server-Sent Event.
   * @default (result, ctx) => { ctx.type = 'application/json'; ctx.body = JSON.stringify(result ?? null) },
   * so a string result is sent as a JSON string
   */
  readonly output?: (result: O, ctx: C) => unknown;
  /**
   * Per-request `priority` and `timeoutMs` (a timeout may only lower the batcher's `timeoutMs`).
   * @default () => ({})
   */
  readonly callOptions?: (ctx: C) => RequestCallOptions;
  /**
   * Told once about each error this route answers with 500 (a handler that threw or returned a bad result); never
   * about 4xx, 503 or 504 answers. The client only ever sees a generic message.
   * @default (error, ctx) => ctx.app.emit('error', error, ctx), which Koa logs unless `app.silent`
   */
  readonly onError?: ServerErrorListener;
}

/**
 * A Koa middleware that batches its requests, with the batcher it uses (for stats, events and `close()`).
 *
 * @example
 * ```ts
 * const route: BatchRouteHandler<string, string> = batchRoute({ handler: generate });
 * router.get('/stats', (ctx) => { ctx.body = route.batcher.stats(); });
 * ```
 */
export interface BatchRouteHandler<I, O, C extends ParameterizedContext = ParameterizedContext> {
  (ctx: C, next: Next): Promise<void>;
  readonly batcher: Batcher<I, O> | StreamingBatcher<I, O>;
}

/** @deprecated Renamed {@link BatchRouteHandler}, the name the Express adapter uses. */
export type BatchRouteMiddleware<I, O, C extends ParameterizedContext = ParameterizedContext> = BatchRouteHandler<
  I,
  O,
  C
>;

const ROUTE_NAME = 'batchRoute';

/**
 * Creates Koa middleware that coalesces concurrent requests into batched handler calls and answers each with its
 * own result, with `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms` headers. Errors are answered as
 * `{"error":{"code","message"}}` with the status from `toHttpError`; a client that disconnects cancels its item.
 * It ends the request: it never calls `next`. Works with `app.use` and with `@koa/router`.
 *
 * @example
 * ```ts
 * router.post('/generate', bodyParser(), batchRoute({
 *   input: (ctx) => parsePrompt(ctx.request.body),
 *   handler: async (prompts: string[], { signal }) => model(prompts, { signal }),
 *   maxBatchSize: 4,
 *   batchWaitTimeoutMs: 5,
 * }));
 * ```
 */
export function batchRoute<I, O, C extends ParameterizedContext = ParameterizedContext>(
  options: BatchRouteOptions<I, O, C>,
): BatchRouteHandler<I, O, C> {
  const report = errorReporter(ROUTE_NAME, options);
  const { onError: _onError, ...routeOptions } = options;
  const batcher = batcherForRoute<I, O>(ROUTE_NAME, routeOptions);
  const { input = defaultInput as (ctx: C) => I, output, callOptions } = routeOptions;
  const route: Route<I, O, C> = { input, send: output ?? defaultOutput, callOptions, report };

  function batchRouteMiddleware(ctx: C, _next: Next): Promise<void> {
    return serveBatched<I, O>(batcher, new KoaExchange(route, ctx));
  }

  return Object.defineProperty(batchRouteMiddleware, 'batcher', {
    value: batcher,
    enumerable: true,
  }) as BatchRouteHandler<I, O, C>;
}

/** What a route does with each request, fixed when the route is made. */
interface Route<I, O, C extends ParameterizedContext> {
  readonly input: (ctx: C) => I | PromiseLike<I>;
  readonly send: (result: O, ctx: C) => unknown;
  readonly callOptions: ((ctx: C) => RequestCallOptions) | undefined;
  readonly report: (error: unknown, ctx: ParameterizedContext) => void;
}

/** One request's exchange: a class, so a request allocates one object rather than a closure per hook. */
class KoaExchange<I, O, C extends ParameterizedContext> implements BatchedExchange<I, O> {
  readonly #route: Route<I, O, C>;
  readonly #ctx: C;
  readonly res: C['res'];

  constructor(route: Route<I, O, C>, ctx: C) {
    this.#route = route;
    this.#ctx = ctx;
    this.res = ctx.res;
  }

  readInput(): I | PromiseLike<I> {
    return this.#route.input(this.#ctx);
  }

  callOptions(): RequestCallOptions | undefined {
    return this.#route.callOptions?.(this.#ctx);
  }

  setHeaders(headers: Record<string, string>): void {
    // Plain string headers: what `ctx.set` would do, without its per-header wrapper calls.
    const { res } = this;
    for (const name in headers) res.setHeader(name, headers[name] as string);
  }

  send(result: O): unknown {
    return this.#route.send(result, this.#ctx);
  }

  sendError(error: unknown): void {
    sendError(this.#ctx, error);
    this.#route.report(error, this.#ctx);
  }

  beforeStream(): void {
    this.#ctx.status = 200;
    // Koa would pipe a body stream and log every client disconnect as an error; the adapter writes itself.
    this.#ctx.respond = false;
  }
}

function defaultInput(ctx: ParameterizedContext): unknown {
  const { body } = ctx.request as { body?: unknown };
  if (body !== undefined) return body;
  throw missingBody(hasBody(ctx.req));
}

function defaultOutput(result: unknown, ctx: ParameterizedContext): void {
  // `ctx.body = string` would be sent as text/plain; a result is always JSON.
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(result ?? null);
}

/**
 * The 400 of a route whose default `input` found no body: none was sent, or one was sent and nothing read it (no
 * `jsonBody()` (or `@koa/bodyparser`) before the route). Never `undefined` handed to the handler with a 200.
 */
function missingBody(sent: boolean): BatchError {
  return new BatchError(
    ErrorCode.INVALID_INPUT,
    sent
      ? 'The request body was not read: the server must mount `jsonBody()` (or `@koa/bodyparser`) before `batchRoute` (or give it an `input`)'
      : 'Expected a JSON request body, got none',
    { details: { field: 'body' } },
  );
}
