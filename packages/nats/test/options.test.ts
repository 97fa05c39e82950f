import { createNatsQueue, createNatsWorker } from '@microbatch/nats';
import { describe, expect, it } from 'vitest';

const url = 'nats://127.0.0.1:1';
const handlers = { echo: async (inputs: unknown[]) => inputs };

describe('option checks (once, at creation, with what was given)', () => {
  it.each([
    [{ url: 'redis://x', queue: 'q' }, 'Expected `url` to be a nats:// or tls:// URL, got `"redis://x"` (string)'],
    [{ url, queue: '' }, 'Expected `queue` to be a non-empty string, got `""` (string)'],
    [{ url, queue: 'a.b' }, 'Expected `queue` to be a name of letters, digits, `-` and `_`, got `"a.b"` (string)'],
    [{ url, queue: 'q', maxQueueSize: 0 }, 'Expected `maxQueueSize` to be an integer >= 1, got `0` (number)'],
    [{ url, queue: 'q', timeoutMs: 0 }, 'Expected `timeoutMs` to be a number > 0, got `0` (number)'],
    [{ url, queue: 'q', workerGraceMs: -1 }, 'Expected `workerGraceMs` to be a finite number >= 0, got `-1` (number)'],
    [{ url, queue: 'q', tracer: {} }, 'Expected `tracer` to be an object with `capture` and `startBatch` functions'],
  ])('createNatsQueue(%j) throws a TypeError', (options, message) => {
    expect(() => createNatsQueue(options as never)).toThrow(new TypeError(message));
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
    [{ url, queue: 'q', handlers, log: 'loud' }, 'Expected `log` to be a function, a pino-compatible logger or false'],
    [
      { url, queue: 'q', handlers, tracer: { capture: () => undefined, startBatch: () => undefined, extract: 1 } },
      'Expected `tracer.extract` to be a function when given',
    ],
    [
      { url, queue: 'q', handlers, resumable: { withTokens: () => undefined } },
      'Expected `resumable` to be an object with `withTokens` and `tokensOf` functions',
    ],
  ])('createNatsWorker(%j) throws a TypeError', (options, message) => {
    expect(() => createNatsWorker(options as never)).toThrow(message);
  });
});
