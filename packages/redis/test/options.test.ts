import { createRedisQueue, createRedisWorker } from '@microbatch/redis';
import { checkDeadlineFits } from '@microbatch/core/http';
import { describe, expect, it } from 'vitest';

const url = 'redis://127.0.0.1:1';
const handlers = { echo: async (inputs: unknown[]) => inputs };

describe('option checks (once, at creation, with what was given)', () => {
  it.each([
    [{ url: 'http://x', queue: 'q' }, 'Expected `url` to be a redis:// or rediss:// URL, got `"http://x"` (string)'],
    [{ url, queue: '' }, 'Expected `queue` to be a non-empty string, got `""` (string)'],
    [{ url, queue: 'a b' }, 'Expected `queue` to be a name without spaces or braces, got `"a b"` (string)'],
    [{ url, queue: 'q', maxQueueSize: 0 }, 'Expected `maxQueueSize` to be an integer >= 1, got `0` (number)'],
    [{ url, queue: 'q', timeoutMs: 0 }, 'Expected `timeoutMs` to be a number > 0, got `0` (number)'],
    [{ url, queue: 'q', workerGraceMs: -1 }, 'Expected `workerGraceMs` to be a finite number >= 0, got `-1` (number)'],
    [{ url, queue: 'q', tracer: {} }, 'Expected `tracer` to be an object with `capture` and `startBatch` functions'],
  ])('createRedisQueue(%j) throws a TypeError', (options, message) => {
    expect(() => createRedisQueue(options as never)).toThrow(new TypeError(message));
  });

  it.each([
    [{ url, queue: 'q' }, 'Expected `handlers` or `streamingHandlers` to name at least one handler'],
    [{ url, queue: 'q', handlers: { echo: 1 } }, 'Expected `handlers.echo` to be a function, got `1` (number)'],
    [
      { url, queue: 'q', handlers, streamingHandlers: handlers },
      'Expected each handler name once, got `echo` in both `handlers` and `streamingHandlers`',
    ],
    [{ url, queue: 'q', handlers, maxBatchSize: 0 }, 'Expected `maxBatchSize` to be an integer >= 1, got `0` (number)'],
    [
      { url, queue: 'q', handlers, maxDeliveries: 1.5 },
      'Expected `maxDeliveries` to be an integer >= 1, got `1.5` (number)',
    ],
    [
      { url, queue: 'q', handlers, claimIdleMs: -1 },
      'Expected `claimIdleMs` to be a finite number > 0, got `-1` (number)',
    ],
    [
      { url, queue: 'q', handlers, tracer: { capture: () => undefined, startBatch: () => undefined, extract: 1 } },
      'Expected `tracer.extract` to be a function when given',
    ],
  ])('createRedisWorker(%j) throws a TypeError', (options, message) => {
    expect(() => createRedisWorker(options as never)).toThrow(new TypeError(message));
  });
});

describe('deadlines that fit the HTTP server', () => {
  it("keeps a queue's default deadline below the server's idle timeout, and refuses a longer one at start-up", async () => {
    const queue = createRedisQueue({ url, queue: 'q' });
    expect(queue.timeoutMs).toBe(30_000);
    expect(() => checkDeadlineFits(queue.timeoutMs)).not.toThrow();
    expect(() => checkDeadlineFits(60_000)).toThrow(
      new TypeError(
        "Expected the server's `idleTimeoutMs` (60000) to be longer than the longest queue deadline (60000 ms): " +
          'a waiting client would see its connection closed instead of a 504',
      ),
    );
    await queue.close();
  });
});
