import type { ServerResponse } from 'node:http';
import { takesSignalLike } from '../batcher-brand.js';
import type { Batcher, CallOptions, DispatchInfo, StreamingBatcher } from '../types.js';
import { toInputError, type RequestCallOptions } from './route.js';
import { writeSse } from './sse.js';
import { isPromiseLike } from '../util/checks.js';

/**
 * The response headers that show batching at work: `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms`.
 *
 * @example
 * ```ts
 * await batcher.call(input, { onDispatch: (info) => res.set(batchHeaders(info)) });
 * ```
 */
export function batchHeaders(info: DispatchInfo): Record<string, string> {
  return {
    'X-Batch-Size': String(info.batchSize),
    'X-Batch-Id': String(info.batchId),
    'X-Queue-Time-Ms': info.queueTimeMs.toFixed(2),
  };
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

const clientClosed = (): DOMException => new DOMException('The client closed the connection', 'AbortError');

/**
 * {@link watchDisconnect} for the batchers `createBatcher()` makes, whose engine takes any object with
 * `addEventListener` as a call's signal: the same answer to a client that goes away, without an `AbortController`
 * per request. Creating one, with its listener, cost more than the engine's whole work for an item, and its
 * signal outlives young-generation collections, which made every scavenge slower under load.
 */
class ResponseWatch implements DisconnectWatch {
  aborted = false;
  reason: unknown = undefined;
  readonly #res: ServerResponse;
  #onClose: (() => void) | undefined = undefined;
  #listener: ((this: unknown, event?: unknown) => void) | undefined = undefined;
  #more: Array<(this: unknown, event?: unknown) => void> | undefined = undefined;

  constructor(res: ServerResponse) {
    this.#res = res;
    if (res.destroyed && !res.writableFinished) {
      this.#abort();
      return;
    }
    // Assigned, not a class field: no per-request `name` bookkeeping under transpilers that keep names.
    this.#onClose = () => {
      if (!res.writableFinished) this.#abort();
    };
    res.on('close', this.#onClose);
  }

  /** The signal-like face the engine subscribes to. */
  get signal(): AbortSignal {
    return this as unknown as AbortSignal;
  }

  addEventListener(type: string, listener: ((this: unknown, event?: unknown) => void) | null): void {
    if (type !== 'abort' || typeof listener !== 'function' || this.aborted) return;
    if (this.#listener === undefined) this.#listener = listener;
    else (this.#more ??= []).push(listener);
  }

  removeEventListener(type: string, listener: unknown): void {
    if (type !== 'abort') return;
    if (this.#listener === listener) this.#listener = undefined;
    else if (this.#more !== undefined) this.#more = this.#more.filter((other) => other !== listener);
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  dispose(): void {
    if (this.#onClose !== undefined) this.#res.off('close', this.#onClose);
    this.#onClose = undefined;
  }

  #abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = clientClosed();
    // Listeners run once, as with `{ once: true }` (the engine's).
    const first = this.#listener;
    const more = this.#more;
    this.#listener = undefined;
    this.#more = undefined;
    const event = { type: 'abort', target: this };
    first?.call(this, event);
    if (more !== undefined) for (const listener of more) listener.call(this, event);
  }
}

/** Sets the `X-Batch-*` headers when the item's batch goes (a returned arrow: no per-request `name` under tsx). */
function headersAtDispatch<I, O>(exchange: BatchedExchange<I, O>): (info: DispatchInfo) => void {
  return (info) => {
    if (!exchange.res.headersSent) exchange.setHeaders(batchHeaders(info));
  };
}

/** What {@link serveBatched} needs from a framework for one request. */
export interface BatchedExchange<I, O> {
  /** The Node response underneath the framework's (for disconnects and SSE). */
  readonly res: ServerResponse;
  /** Turns the request into the batch input; a throw answers 400 (see {@link toInputError}). */
  readInput(): I | PromiseLike<I>;
  /** This request's priority, deadline, latency limit and fairness key, if the route sets them. */
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
  const disconnect = !batcher.streaming && takesSignalLike(batcher) ? new ResponseWatch(res) : watchDisconnect(res);
  const { signal } = disconnect;
  try {
    let item: I;
    try {
      // Awaited only when it is a promise: most inputs are read synchronously, and each await costs a turn.
      const read = exchange.readInput();
      item = isPromiseLike(read) ? await read : read;
    } catch (error) {
      throw toInputError(error);
    }
    const extra = exchange.callOptions?.();
    const call: CallOptions = {
      priority: extra?.priority,
      timeoutMs: extra?.timeoutMs,
      maxLatencyMs: extra?.maxLatencyMs,
      fairnessKey: extra?.fairnessKey,
      signal,
      onDispatch: headersAtDispatch(exchange),
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
    const sent = exchange.send(result);
    if (isPromiseLike(sent)) await sent;
  } catch (error) {
    // A client that went away gets nothing: its response is already closed.
    if (!signal.aborted) exchange.sendError(error);
  } finally {
    disconnect.dispose();
  }
}
