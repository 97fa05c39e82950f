// Server-Sent Events as a body the framework pulls (Nest sends an async iterable itself), beside `writeSse`, which
// pushes them to a Node response: both produce the same events from core's `sseEvent`, `SSE_DONE` and `sseError`.
import { SSE_DONE, sseError, sseEvent } from './sse.js';

/** What {@link toSseBody} asks of the code that owns the response. */
export interface SseBodyHooks {
  /** Called once, before the first chunk goes out: sets the Server-Sent Events headers. */
  start(): void;
  /** Turns a failure before the first chunk into what the framework answers as a JSON error (thrown by `next()`). */
  reject(error: unknown): unknown;
  /** Told about a failure after the headers went out, which reaches the client as an `event: error`. */
  report(error: unknown): void;
  /** Called once if the response stops reading before the stream ended (the client went away). */
  cancel(): void;
  /** Called once when the body is over, whichever way it ended. */
  end?(): void;
}

/**
 * Turns one item's values into the chunks of a Server-Sent Events response, for a framework that sends a streaming
 * body itself: the first value is read before any header goes out (a failure there is `hooks.reject`ed, so it can
 * still be a JSON error), then one `data:` event per value, `data: [DONE]`, or an `event: error` for a later
 * failure; `return()` (the framework saw the client leave) cancels the item. A hand-written iterator rather than an
 * `async function*`: a generator suspended in `await` queues a `return()` until that `await` settles, so a client
 * leaving before its batch produced anything would not cancel its item until then.
 *
 * @example
 * ```ts
 * const body = toSseBody(batcher.stream(input, { signal }), hooks); // 'data: {...}\n\n', ..., 'data: [DONE]\n\n'
 * ```
 */
export function toSseBody(source: AsyncIterator<unknown>, hooks: SseBodyHooks): AsyncIterableIterator<string> {
  let started = false;
  let finished = false;
  const finish = (): void => {
    finished = true;
    hooks.end?.();
  };
  const body: AsyncIterableIterator<string> = {
    async next(): Promise<IteratorResult<string>> {
      if (finished) return { done: true, value: undefined };
      let step: IteratorResult<unknown>;
      try {
        step = await source.next();
      } catch (error) {
        if (finished) return { done: true, value: undefined };
        finish();
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
        finish();
        return { done: false, value: SSE_DONE };
      }
      return { done: false, value: sseEvent(step.value) };
    },
    async return(): Promise<IteratorResult<string>> {
      if (!finished) {
        finish();
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
