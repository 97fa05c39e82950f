import type { ServerResponse } from 'node:http';
import { toHttpError } from './error-mapping.js';

/** The headers of a Server-Sent Events response. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-transform',
  'X-Accel-Buffering': 'no',
};

/**
 * One Server-Sent Event carrying `value` as JSON (`data: ...\n\n`); a named event when `event` is given.
 *
 * @example
 * ```ts
 * res.write(sseEvent({ token: 'Once' })); // 'data: {"token":"Once"}\n\n'
 * ```
 */
export function sseEvent(value: unknown, event?: string): string {
  const data = `data: ${JSON.stringify(value ?? null)}\n\n`;
  return event === undefined ? data : `event: ${event}\n${data}`;
}

/** The last event of every stream. */
export const SSE_DONE = 'data: [DONE]\n\n';

/**
 * The event sent when a stream fails after its headers went out: `event: error` with the JSON error body.
 *
 * @example
 * ```ts
 * res.end(sseError(error));
 * ```
 */
export function sseError(error: unknown): string {
  return sseEvent(toHttpError(error).body, 'error');
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
