import type { Next, ParameterizedContext } from 'koa';
import { batcherForRoute, serveBatched } from '@microbatch/core';
import type { Batcher, RequestCallOptions, RouteBatcherOptions, StreamingBatcher } from '@microbatch/core';
import { renderError } from './error-handler.js';

/**
 * Options of {@link batchRoute}: the route's own, plus `handler` and every core batcher option, or `batcher`.
 * `C` is the context type, for example `RouterContext` from `@koa/router`.
 *
 * @example
 * ```ts
 * const options: BatchRouteOptions<string, string, RouterContext> = { input: (ctx) => ctx.params.prompt, handler: generate };
 * ```
 */
export interface BatchRouteOptions<I, O, C extends ParameterizedContext = ParameterizedContext> extends RouteBatcherOptions<I, O> {
  /**
   * Turns a request into one handler input. Validate here: a throw answers 400 `INVALID_INPUT` with the error's
   * message (a `BatchError` or an `http-errors` error, such as `ctx.throw(415)`, keeps its own code and status).
   * @default (ctx) => ctx.request.body
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
}

/**
 * A Koa middleware that batches its requests, with the batcher it uses (for stats, events and `close()`).
 *
 * @example
 * ```ts
 * const route: BatchRouteMiddleware<string, string> = batchRoute({ handler: generate });
 * router.get('/stats', (ctx) => { ctx.body = route.batcher.stats(); });
 * ```
 */
export interface BatchRouteMiddleware<I, O, C extends ParameterizedContext = ParameterizedContext> {
  (ctx: C, next: Next): Promise<void>;
  readonly batcher: Batcher<I, O> | StreamingBatcher<I, O>;
}

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
): BatchRouteMiddleware<I, O, C> {
  const batcher = batcherForRoute<I, O>(ROUTE_NAME, options);
  const { input = defaultInput as (ctx: C) => I, output, callOptions } = options;
  const send = output ?? defaultOutput;

  function batchRouteMiddleware(ctx: C, _next: Next): Promise<void> {
    return serveBatched<I, O>(batcher, {
      res: ctx.res,
      readInput: () => input(ctx),
      callOptions: () => callOptions?.(ctx),
      setHeaders: (headers) => ctx.set(headers),
      send: (result) => send(result, ctx),
      sendError: (error) => renderError(ctx, error),
      beforeStream: () => {
        ctx.status = 200;
        // Koa would pipe a body stream and log every client disconnect as an error; the adapter writes itself.
        ctx.respond = false;
      },
    });
  }

  return Object.defineProperty(batchRouteMiddleware, 'batcher', { value: batcher, enumerable: true }) as BatchRouteMiddleware<I, O, C>;
}

function defaultInput(ctx: ParameterizedContext): unknown {
  return (ctx.request as { body?: unknown }).body;
}

function defaultOutput(result: unknown, ctx: ParameterizedContext): void {
  // `ctx.body = string` would be sent as text/plain; a result is always JSON.
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(result ?? null);
}
