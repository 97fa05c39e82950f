// The option checks every transport shares (`@microbatch/transport`'s queue-options.ts), run on each (drivers.ts):
// once, at creation, with what was given. Each package's options.test.ts keeps its own (URL, queue names).
import { checkDeadlineFits } from '@microbatch/core/http';
import { describe, expect, it } from 'vitest';
import { drivers } from './drivers.js';

const handlers = { echo: async (inputs: unknown[]) => inputs };
const tracerWithoutExtract = { capture: () => undefined, startBatch: () => undefined, extract: 1 };

describe.each(drivers)('$name option checks (once, at creation, with what was given)', (driver) => {
  const url = driver.unreachableUrl;

  it.each([
    [{ queue: '' }, 'Expected `queue` to be a non-empty string, got `""` (string)'],
    [{ maxQueueSize: 0 }, 'Expected `maxQueueSize` to be an integer >= 1, got `0` (number)'],
    [{ timeoutMs: 0 }, 'Expected `timeoutMs` to be a number > 0, got `0` (number)'],
    [{ workerGraceMs: -1 }, 'Expected `workerGraceMs` to be a finite number >= 0, got `-1` (number)'],
    [{ tracer: {} }, 'Expected `tracer` to be an object with `capture` and `startBatch` functions'],
  ])('a queue with %j throws a TypeError', (options, message) => {
    expect(() => driver.createQueue({ url, queue: 'q', ...options })).toThrow(new TypeError(message));
  });

  it.each([
    [{ handlers: undefined }, 'Expected `handlers` or `streamingHandlers` to name at least one handler'],
    [{ handlers: { echo: 1 } }, 'Expected `handlers.echo` to be a function, got `1` (number)'],
    [
      { streamingHandlers: handlers },
      'Expected each handler name once, got `echo` in both `handlers` and `streamingHandlers`',
    ],
    [{ maxBatchSize: 0 }, 'Expected `maxBatchSize` to be an integer >= 1, got `0` (number)'],
    [{ maxDeliveries: 1.5 }, 'Expected `maxDeliveries` to be an integer >= 1, got `1.5` (number)'],
    [{ claimIdleMs: -1 }, 'Expected `claimIdleMs` to be a finite number > 0, got `-1` (number)'],
    [{ log: 'loud' }, 'Expected `log` to be a function, a pino-compatible logger or false'],
    [{ tracer: tracerWithoutExtract }, 'Expected `tracer.extract` to be a function when given'],
    [
      { resumable: { withTokens: () => undefined } },
      'Expected `resumable` to be an object with `withTokens` and `tokensOf` functions',
    ],
  ])('a worker with %j throws a TypeError', (options, message) => {
    const create = () => driver.createWorker({ url, queue: 'q', handlers, ...options });
    expect(create).toThrow(TypeError);
    expect(create).toThrow(message);
  });

  it("keeps a queue's default deadline below the server's idle timeout, and refuses a longer one at start-up", async () => {
    const queue = driver.createQueue({ url, queue: 'q' });
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
