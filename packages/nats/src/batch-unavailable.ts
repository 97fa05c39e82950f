// A NATS Batch API store's failures while NATS is unreachable (the connection is down, a request timed out, no
// JetStream answered) become 503 `UNAVAILABLE` with a Retry-After, as the Redis store's do, so the Batch API's
// routes answer "try again" rather than 500. One wrapper over each part's methods, rather than a catch in each.
import { errors } from '@nats-io/transport-node';
import { unavailable } from '@microbatch/transport';

const UNREACHABLE = [
  errors.ConnectionError,
  errors.ClosedConnectionError,
  errors.DrainingConnectionError,
  errors.TimeoutError,
  errors.NoRespondersError,
  errors.RequestError,
];

/** `error` as the store reports it: a 503 when NATS is unreachable, else as it is. */
function reported(error: unknown): unknown {
  const down = UNREACHABLE.some((type) => error instanceof type);
  return down ? unavailable('The Batch API store (NATS) is unreachable', 1, error) : error;
}

async function* guardedIteration<T>(iterable: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    yield* iterable;
  } catch (error) {
    throw reported(error);
  }
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof (value as { [Symbol.asyncIterator]?: unknown } | null)?.[Symbol.asyncIterator] === 'function';
}

/**
 * `part` with each of `methods` reporting NATS being unreachable as 503 `UNAVAILABLE`, whether the method returns
 * a promise, a stream (`read`), or a promise of a stream (`get`).
 *
 * @example
 * ```ts
 * const records = guarded(new NatsRecords(kv), ['get', 'put', 'create', 'delete', 'list']);
 * ```
 */
export function guarded<T extends object>(part: T, methods: ReadonlyArray<keyof T & string>): T {
  const wrapped: Record<string, unknown> = {};
  for (const name of methods) {
    const method = (part[name] as (...args: unknown[]) => unknown).bind(part);
    wrapped[name] = (...args: unknown[]): unknown => {
      const result = method(...args);
      if (isAsyncIterable(result)) return guardedIteration(result);
      return Promise.resolve(result).then(
        (value) => (isAsyncIterable(value) ? guardedIteration(value) : value),
        (error: unknown) => {
          throw reported(error);
        },
      );
    };
  }
  return wrapped as T;
}
