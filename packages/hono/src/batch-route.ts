import type { Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { batchHeaders, batcherForRoute, SSE_HEADERS, toHttpError, toInputError } from '@microbatch/core/web';
import type { Batcher, CallOptions, DispatchInfo, StreamingBatcher } from '@microbatch/core';
import type { BatchRouteOptions as RouteOptions, RequestCallOptions, ServerErrorListener } from '@microbatch/core/web';
import { JSON_TYPE, errorReporter, errorResponse } from './error-response.js';
import { readJsonBody } from './json-body.js';

/**
 * Options of {@link batchRoute}: the route's own hooks, plus either `handler` with any core batcher option (the
 * route creates its batcher) or `batcher` alone (an existing one, configured when it was created). Giving neither,
 * both, or batcher options beside `batcher` does not type-check (and throws a `TypeError` at run time): core's strict
 * `BatchRouteOptions` over this adapter's hooks, as for Express, Koa and Fastify. `C` is the context type, for
 * example `Context<{ Variables: { user: string } }>`.
 *
 * @example
 * ```ts
 * const options: BatchRouteOptions<string, number[]> = { input: async (c) => (await c.req.json()).text, handler: embed };
 * ```
 */
export type BatchRouteOptions<I, O, C extends Context = Context> = RouteOptions<I, O, BatchRouteHooks<I, O, C>>;

/**
 * The hooks of {@link batchRoute} that do not depend on where its batcher comes from.
 *
 * @example
 * ```ts
 * const hooks: BatchRouteHooks<string, string> = { input: (c) => c.req.query('prompt') ?? '' };
 * ```
 */
export interface BatchRouteHooks<I, O, C extends Context = Context> {
  /**
   * Turns a request into one handler input. Validate here: a throw answers 400 `INVALID_INPUT` with the error's
   * message (a `BatchError`, an `HTTPException` or any error with a 4xx `status` keeps its own code and status).
   * @default (c) => the body `jsonBody()` read, or the body read now with its checks and 64 KiB limit
   */
  readonly input?: (c: C) => I | PromiseLike<I>;
  /**
   * Makes the response for one result. Not used when the batcher streams: each value is sent as one Server-Sent
   * Event.
   * @default (result, c) => c.json(result ?? null), so a string result is sent as a JSON string
   */
  readonly output?: (result: O, c: C) => Response | PromiseLike<Response>;
  /**
   * Per-request `priority`, `timeoutMs`, `maxLatencyMs` and `fairnessKey` (a timeout may only lower the batcher's).
   * @default () => ({})
   */
  readonly callOptions?: (c: C) => RequestCallOptions;
  /**
   * Told once about each error this route answers with 500 (a handler that threw or returned a bad result); never
   * about 4xx, 503 or 504 answers. The client only ever sees a generic message.
   * @default (error) => console.error(error), as Hono's own error handler logs
   */
  readonly onError?: ServerErrorListener;
}

/**
 * A Hono handler that batches its requests, with the batcher it uses (for stats, events and `close()`).
 *
 * @example
 * ```ts
 * const route: BatchRouteHandler<string, string> = batchRoute({ handler: generate });
 * app.get('/stats', (c) => c.json(route.batcher.stats()));
 * ```
 */
export interface BatchRouteHandler<I, O, C extends Context = Context> {
  (c: C): Promise<Response>;
  readonly batcher: Batcher<I, O> | StreamingBatcher<I, O>;
}

const ROUTE_NAME = 'batchRoute';

/**
 * Creates a Hono handler that coalesces concurrent requests into batched handler calls and answers each with its
 * own result, with `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms` headers. Errors are answered as
 * `{"error":{"code","message"}}` with the status from `toHttpError`; the request's `signal` (aborted when the client
 * goes away) cancels its item; a streaming batcher answers with Server-Sent Events through Hono's `streamSSE`. Web
 * APIs only: it runs wherever Hono runs.
 *
 * @example
 * ```ts
 * app.post('/generate', jsonBody(), batchRoute({
 *   input: (c) => parsePrompt(c.var.jsonBody),
 *   handler: async (prompts: string[], { signal }) => model(prompts, { signal }),
 *   maxBatchSize: 4,
 * }));
 * ```
 */
export function batchRoute<I, O, C extends Context = Context>(
  options: BatchRouteOptions<I, O, C>,
): BatchRouteHandler<I, O, C> {
  const report = errorReporter(ROUTE_NAME, options);
  const { onError: _onError, ...routeOptions } = options;
  const batcher = batcherForRoute<I, O>(ROUTE_NAME, routeOptions);
  const { input = defaultInput as (c: C) => I, output = defaultOutput, callOptions } = routeOptions;

  async function batchRouteHandler(c: C): Promise<Response> {
    const disconnect = watchDisconnect(c.req.raw.signal);
    const { signal } = disconnect;
    try {
      let item: I;
      try {
        const read = input(c);
        item = isPromiseLike(read) ? await read : read;
      } catch (error) {
        throw toInputError(error);
      }
      const extra = callOptions?.(c);
      let dispatched: DispatchInfo | undefined;
      const call: CallOptions = {
        priority: extra?.priority,
        timeoutMs: extra?.timeoutMs,
        maxLatencyMs: extra?.maxLatencyMs,
        fairnessKey: extra?.fairnessKey,
        signal,
        onDispatch: (info) => {
          dispatched = info;
        },
      };
      if (batcher.streaming) {
        const values = batcher.stream(item, call);
        // Pulled before any header goes out, so a failure before the first value is a plain JSON error.
        const first = await values.next();
        if (dispatched !== undefined) setHeaders(c, batchHeaders(dispatched));
        return sseResponse(c, first, values, report);
      }
      const result = await batcher.call(item, call);
      if (dispatched !== undefined) setHeaders(c, batchHeaders(dispatched));
      return await output(result, c);
    } catch (error) {
      // A client that went away reads nothing: an empty answer, which the runtime has nowhere to write anyway.
      if (signal.aborted) return new Response(null, { status: CLIENT_CLOSED });
      report(error);
      return errorResponse(c, error);
    } finally {
      disconnect.dispose();
    }
  }

  return Object.defineProperty(batchRouteHandler, 'batcher', {
    value: batcher,
    enumerable: true,
  }) as BatchRouteHandler<I, O, C>;
}

/** nginx's status for a request whose client went away before the answer; no client ever reads it. */
const CLIENT_CLOSED = 499;

/**
 * The item's signal: aborted when the request's is (the client went away), with the same reason as on every other
 * adapter, whatever words the runtime used.
 */
function watchDisconnect(request: AbortSignal): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const abort = (): void => controller.abort(new DOMException('The client closed the connection', 'AbortError'));
  if (request.aborted) abort();
  else request.addEventListener('abort', abort, { once: true });
  return { signal: controller.signal, dispose: () => request.removeEventListener('abort', abort) };
}

function setHeaders(c: Context, headers: Record<string, string>): void {
  for (const name in headers) c.header(name, headers[name]);
}

/**
 * The Server-Sent Events response of one item: `first`, then every further value as a `data:` event, then
 * `data: [DONE]`; a failure after the headers went out becomes an `event: error` with the JSON error body. The
 * stream's abort hook (the client went away) stops pulling, which cancels this caller's item only.
 */
function sseResponse(
  c: Context,
  first: IteratorResult<unknown>,
  values: AsyncIterator<unknown>,
  report: (error: unknown) => void,
): Response {
  const response = streamSSE(c, async (stream: SSEStreamingApi) => {
    let done = first.done === true;
    stream.onAbort(() => {
      if (!done) void values.return?.()?.catch(() => undefined);
    });
    try {
      if (!done) await stream.writeSSE({ data: JSON.stringify(first.value ?? null) });
      while (!done && !stream.aborted) {
        const step = await values.next();
        done = step.done === true;
        if (!done && !stream.aborted) await stream.writeSSE({ data: JSON.stringify(step.value ?? null) });
      }
      if (!stream.aborted) await stream.writeSSE({ data: '[DONE]' });
    } catch (error) {
      if (!stream.aborted) {
        report(error);
        await stream.writeSSE({ event: 'error', data: JSON.stringify(toHttpError(error).body) }).catch(() => undefined);
      }
    } finally {
      if (!done) {
        done = true;
        await values.return?.()?.catch(() => undefined);
      }
    }
  });
  // The same headers as every other adapter's streams (Hono's helper sets `no-cache` and no charset).
  for (const [name, value] of Object.entries(SSE_HEADERS)) response.headers.set(name, value);
  // The server decides about the connection (a client's `Connection: close` is honoured once the stream ends).
  response.headers.delete('Connection');
  return response;
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

function defaultInput(c: Context): unknown {
  const body = c.get('jsonBody');
  return body === undefined ? readJsonBody(c.req.raw) : body;
}

function defaultOutput(result: unknown, c: Context): Response {
  return c.body(JSON.stringify(result ?? null), 200, JSON_TYPE);
}
