// The framework-agnostic half of every HTTP adapter (Express, Koa, Nest on Express or Fastify): they all end in a
// Node `ServerResponse`, so disconnect detection and SSE writing are shared here instead of written three times.
import type { ServerResponse } from 'node:http';
import { createBatcher } from './batcher.js';
import { BatchError, ErrorCode, isBatchError } from './errors.js';
import { SSE_DONE, SSE_HEADERS, batchHeaders, sseError, sseEvent, toBatchError, toHttpError } from './http.js';
import { describe } from './options.js';
import type {
  BatchHandler,
  Batcher,
  BatcherOptions,
  CallOptions,
  DispatchInfo,
  StreamingBatchHandler,
  StreamingBatcher,
} from './types.js';

/**
 * The per-request call options a route may set from the request.
 *
 * @example
 * ```ts
 * batchRoute({ handler, callOptions: (req) => ({ priority: req.get('x-tier') === 'pro' ? 1 : 0, timeoutMs: 2_000 }) });
 * ```
 */
export type RequestCallOptions = Pick<CallOptions, 'priority' | 'timeoutMs'>;

/**
 * What a route batches with: its own handler (and batcher options), or an existing batcher.
 *
 * @example
 * ```ts
 * batchRoute({ handler: async (prompts: string[]) => model(prompts), maxBatchSize: 8 }); // its own batcher
 * batchRoute({ batcher: sharedBatcher }); // a batcher shared with other routes
 * ```
 */
export interface RouteBatcherOptions<I, O> extends BatcherOptions<I> {
  /**
   * The batch handler; the route creates its batcher from it and the other batcher options. An `async function*`
   * streams (Server-Sent Events). Give exactly one of `handler` and `batcher`.
   */
  readonly handler?: BatchHandler<I, O> | StreamingBatchHandler<I, O>;
  /** An existing batcher, for example one shared by several routes. Give exactly one of `handler` and `batcher`. */
  readonly batcher?: Batcher<I, O> | StreamingBatcher<I, O>;
}

/**
 * Throws the house-style `TypeError` unless `value` is a function or absent.
 *
 * @example
 * ```ts
 * checkOptionalFunction('output', options.output); // TypeError: Expected `output` to be a function, got `1` (number)
 * ```
 */
export function checkOptionalFunction(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new TypeError(`Expected \`${name}\` to be a function, got ${describe(value)}`);
  }
}

/**
 * The batcher a route uses: `batcher` as given, or one created from `handler` and `batcherOptions` (which core
 * validates). `batcherOptions` must hold the options left after the adapter took its own.
 *
 * @example
 * ```ts
 * const { input, output, handler, batcher, ...batcherOptions } = options;
 * const routeBatcherInstance = routeBatcher('batchRoute', { handler, batcher }, batcherOptions);
 * ```
 */
export function routeBatcher<I, O>(
  caller: string,
  options: RouteBatcherOptions<I, O>,
  batcherOptions: BatcherOptions<I>,
): Batcher<I, O> | StreamingBatcher<I, O> {
  const { handler, batcher } = options;
  if ((handler === undefined) === (batcher === undefined)) {
    throw new TypeError(
      `\`${caller}\` needs exactly one of \`handler\` and \`batcher\`, got ${handler === undefined ? 'neither' : 'both'}`,
    );
  }
  if (handler !== undefined) return createBatcher(handler, batcherOptions);
  if (!isBatcher(batcher)) {
    throw new TypeError(`Expected \`batcher\` to be a batcher from \`createBatcher()\`, got ${describe(batcher)}`);
  }
  // Options next to `batcher` would be silently ignored: the batcher was configured when it was created.
  const ignored = Object.keys(batcherOptions).filter((key) => batcherOptions[key as keyof BatcherOptions<I>] !== undefined);
  if (ignored.length > 0) {
    throw new TypeError(
      `\`${caller}\` got \`batcher\` together with batcher options (${ignored.map((key) => `\`${key}\``).join(', ')}); ` +
        'pass them to `createBatcher()` instead',
    );
  }
  return batcher;
}

/** What every framework's `batchRoute` takes besides the batcher options: how to read, send and prioritise. */
export interface RouteHooks {
  readonly input?: unknown;
  readonly output?: unknown;
  readonly callOptions?: unknown;
}

/**
 * Checks a `batchRoute`'s options once, at setup, and returns its batcher: the options are an object, `input`,
 * `output` and `callOptions` are functions when given, exactly one of `handler`/`batcher` is there, and a streaming
 * batcher has no `output` (each value is one Server-Sent Event).
 *
 * @example
 * ```ts
 * const batcher = batcherForRoute<I, O>('batchRoute', options);
 * const { input = (req) => req.body, output, callOptions } = options;
 * ```
 */
export function batcherForRoute<I, O>(
  caller: string,
  options: RouteBatcherOptions<I, O> & RouteHooks,
): Batcher<I, O> | StreamingBatcher<I, O> {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`${caller}\` options to be an object, got ${describe(options)}`);
  }
  const { input, output, callOptions, handler, batcher: given, ...rest } = options;
  checkOptionalFunction('input', input);
  checkOptionalFunction('output', output);
  checkOptionalFunction('callOptions', callOptions);
  const batcher = routeBatcher<I, O>(caller, { handler, batcher: given }, rest);
  if (batcher.streaming && output !== undefined) {
    throw new TypeError(
      `\`${caller}\` got \`output\` for a streaming batcher: each streamed value is sent as one Server-Sent Event`,
    );
  }
  return batcher;
}

function isBatcher<I, O>(value: unknown): value is Batcher<I, O> | StreamingBatcher<I, O> {
  return (
    typeof value === 'function' &&
    typeof (value as { call?: unknown }).call === 'function' &&
    typeof (value as { streaming?: unknown }).streaming === 'boolean'
  );
}

/**
 * The error a route answers when turning the request into an input failed: a `BatchError` or an `http-errors`
 * style error keeps its meaning; anything else is a validation failure (400) whose message is shown.
 *
 * @example
 * ```ts
 * toInputError(new Error('`prompt` must be a string')).code; // 'INVALID_INPUT'
 * ```
 */
export function toInputError(error: unknown): BatchError {
  if (isBatchError(error) || hasStatus(error)) return toBatchError(error);
  const message = error instanceof Error && error.message !== '' ? error.message : 'Invalid input';
  return new BatchError(ErrorCode.INVALID_INPUT, message, { cause: error });
}

function hasStatus(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  return typeof status === 'number' || typeof statusCode === 'number';
}

/** An abort signal for one request, and the function that stops watching once the request is done. */
export interface DisconnectWatch {
  readonly signal: AbortSignal;
  dispose(): void;
}

/**
 * Aborts when the client goes away before the response finished, so a queued item leaves the queue and a running
 * one stops waiting.
 *
 * @example
 * ```ts
 * const watch = watchDisconnect(res);
 * try {
 *   await batcher.call(input, { signal: watch.signal });
 * } finally {
 *   watch.dispose();
 * }
 * ```
 */
export function watchDisconnect(res: ServerResponse): DisconnectWatch {
  const controller = new AbortController();
  const disconnected = (): void => {
    controller.abort(new DOMException('The client closed the connection', 'AbortError'));
  };
  // `req` emits `close` once its body is read, so only the response tells a finished exchange from a dropped one.
  const onClose = (): void => {
    if (!res.writableFinished) disconnected();
  };
  if (res.destroyed && !res.writableFinished) disconnected();
  else res.on('close', onClose);
  return { signal: controller.signal, dispose: () => res.off('close', onClose) };
}

/**
 * Streams an item's values as Server-Sent Events: one `data:` event per value, flushed as produced, then
 * `data: [DONE]`; a failure after the headers went out becomes an `event: error` and ends the stream. Never
 * throws. The caller pulls `first` itself, so a failure before any value can still get a JSON error response.
 *
 * @example
 * ```ts
 * const values = batcher.stream(input, { signal });
 * const first = await values.next(); // a throw here can still become a JSON error
 * await writeSse(res, first, values, signal);
 * ```
 */
export async function writeSse(
  res: ServerResponse,
  first: IteratorResult<unknown>,
  rest: AsyncIterator<unknown>,
  signal: AbortSignal,
): Promise<void> {
  let done = first.done === true;
  try {
    res.statusCode = 200;
    for (const [name, value] of Object.entries(SSE_HEADERS)) res.setHeader(name, value);
    res.flushHeaders();
    if (!done) await writeChunk(res, sseEvent(first.value), signal);
    while (!done) {
      const step = await rest.next();
      done = step.done === true;
      if (!done) await writeChunk(res, sseEvent(step.value), signal);
    }
    if (!signal.aborted) res.end(SSE_DONE);
  } catch (error) {
    if (!signal.aborted) res.end(sseError(error));
  } finally {
    // Stopping early (client gone, write failed) cancels this caller's item only; the batch goes on for the others.
    if (!done) await rest.return?.().catch(() => undefined);
  }
}

async function writeChunk(res: ServerResponse, chunk: string, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  const flushed = res.write(chunk);
  // Compression middleware buffers until told otherwise, which would hold tokens back.
  (res as { flush?: () => void }).flush?.();
  if (!flushed) await onceDrained(res, signal);
}

function onceDrained(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const settle = (): void => {
      res.off('drain', settle);
      signal.removeEventListener('abort', settle);
      if (signal.aborted) reject(signal.reason);
      else resolve();
    };
    res.on('drain', settle);
    signal.addEventListener('abort', settle);
  });
}

/**
 * Answers `error` on a Node response as `{"error":{"code","message"}}` with the status and headers of
 * {@link toHttpError}, or cuts the response short if part of it was already sent (a half-sent body must not look
 * complete to the client).
 *
 * @example
 * ```ts
 * writeHttpError(res, new BatchError('INVALID_INPUT', '`prompt` must be a string')); // 400
 * ```
 */
export function writeHttpError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, headers, body } = toHttpError(error);
  res.statusCode = status;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}

/** What {@link serveBatched} needs from a framework for one request. */
export interface BatchedExchange<I, O> {
  /** The Node response underneath the framework's (for disconnects and SSE). */
  readonly res: ServerResponse;
  /** Turns the request into the batch input; a throw answers 400 (see {@link toInputError}). */
  readInput(): I | PromiseLike<I>;
  /** This request's priority and deadline, if the route sets them. */
  callOptions?(): RequestCallOptions | undefined;
  /** Sets headers on the framework's response, before the body. */
  setHeaders(headers: Record<string, string>): void;
  /** Sends the item's result. */
  send(result: O): unknown;
  /** Answers an error. */
  sendError(error: unknown): void;
  /** Runs before Server-Sent Events are written to `res` directly (Koa hands the response over here). */
  beforeStream?(): void;
}

/**
 * Serves one request through a batcher: reads the input, joins a batch with the client's disconnect as the
 * signal, sets the `X-Batch-*` headers at dispatch, and answers with the result, a Server-Sent Events stream
 * (streaming batchers) or the mapped error. Never throws; a client that went away gets nothing.
 *
 * @example
 * ```ts
 * await serveBatched(batcher, {
 *   res,
 *   readInput: () => req.body,
 *   setHeaders: (headers) => res.set(headers),
 *   send: (result) => res.json(result),
 *   sendError: (error) => writeHttpError(res, error),
 * });
 * ```
 */
export async function serveBatched<I, O>(
  batcher: Batcher<I, O> | StreamingBatcher<I, O>,
  exchange: BatchedExchange<I, O>,
): Promise<void> {
  const { res } = exchange;
  const disconnect = watchDisconnect(res);
  const { signal } = disconnect;
  try {
    let item: I;
    try {
      item = await exchange.readInput();
    } catch (error) {
      throw toInputError(error);
    }
    const extra = exchange.callOptions?.();
    const call: CallOptions = {
      priority: extra?.priority,
      timeoutMs: extra?.timeoutMs,
      signal,
      onDispatch: (info: DispatchInfo) => {
        if (!res.headersSent) exchange.setHeaders(batchHeaders(info));
      },
    };
    if (batcher.streaming) {
      const values = batcher.stream(item, call);
      // Pulled before any header goes out, so a failure before the first value is a plain JSON error.
      const first = await values.next();
      exchange.beforeStream?.();
      await writeSse(res, first, values, signal);
      return;
    }
    const result = await batcher.call(item, call);
    await exchange.send(result);
  } catch (error) {
    // A client that went away gets nothing: its response is already closed.
    if (!signal.aborted) exchange.sendError(error);
  } finally {
    disconnect.dispose();
  }
}
