// Redis's own option checks; the checks every transport shares run on each in test/transport/options.test.ts.
import { createRedisQueue } from '@microbatch/redis';
import { describe, expect, it } from 'vitest';

const url = 'redis://127.0.0.1:1';

describe('option checks (once, at creation, with what was given)', () => {
  it.each([
    [{ url: 'http://x', queue: 'q' }, 'Expected `url` to be a redis:// or rediss:// URL, got `"http://x"` (string)'],
    [{ url, queue: 'a b' }, 'Expected `queue` to be a name without spaces or braces, got `"a b"` (string)'],
  ])('createRedisQueue(%j) throws a TypeError', (options, message) => {
    expect(() => createRedisQueue(options as never)).toThrow(new TypeError(message));
  });
});
