import { SSE_DONE, sseError, sseEvent } from '@microbatch/core';

/** What the SSE body asks of the interceptor that owns the response. */
export interface SseBodyHooks {
  /** Called once, before the first chunk goes out: sets the Server-Sent Events headers. */
  start(): void;
  /** Turns a failure before the first chunk into the exception Nest's filters answer (as JSON, not as SSE). */
  reject(error: unknown): unknown;
  /** Told about a failure after the headers went out, which reaches the client as an `event: error`. */
  report(error: unknown): void;
  /** Called once if the response stops reading before the stream ended (the client went away). */
  cancel(): void;
}

/**
 * Turns one item's values into the chunks of a Server-Sent Events response, which Nest sends as a streaming body:
 * it reads the first chunk before any header goes out, stops reading when the client disconnects, and then calls
 * `return()`. A hand-written iterator rather than an `async function*`: a generator suspended in `await` queues a
 * `return()` until that `await` settles, so a client leaving before its batch produced anything would not cancel
 * its item until then.
 *
 * @example
 * ```ts
 * const body = toSseBody(batcher.stream(input, { signal }), hooks); // 'data: {...}\n\n', ..., 'data: [DONE]\n\n'
 * ```
 */
export function toSseBody(source: AsyncIterator<unknown>, hooks: SseBodyHooks): AsyncIterableIterator<string> {
  let started = false;
  let finished = false;
  const body: AsyncIterableIterator<string> = {
    async next(): Promise<IteratorResult<string>> {
      if (finished) return { done: true, value: undefined };
      let step: IteratorResult<unknown>;
      try {
        step = await source.next();
      } catch (error) {
        if (finished) return { done: true, value: undefined };
        finished = true;
        if (!started) throw hooks.reject(error);
        hooks.report(error);
        return { done: false, value: sseError(error) };
      }
      if (finished) return { done: true, value: undefined };
      if (!started) {
        started = true;
        hooks.start();
      }
      if (step.done === true) {
        finished = true;
        return { done: false, value: SSE_DONE };
      }
      return { done: false, value: sseEvent(step.value) };
    },
    async return(): Promise<IteratorResult<string>> {
      if (!finished) {
        finished = true;
        hooks.cancel();
        await source.return?.();
      }
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator](): AsyncIterableIterator<string> {
      return body;
    },
  };
  return body;
}
