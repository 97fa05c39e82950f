// NATS's own option checks (its URL, prefix and queue names); the checks every transport shares run on each in
// test/transport/options.test.ts.
import { MAX_STREAM_NAME, checkQueueName, createNatsQueue, createNatsWorker, encodeQueueName } from '@microbatch/nats';
import { describe, expect, it } from 'vitest';

const url = 'nats://127.0.0.1:1';
const handlers = { echo: async (inputs: unknown[]) => inputs };

describe('option checks (once, at creation, with what was given)', () => {
  it.each([
    [{ url: 'redis://x', queue: 'q' }, 'Expected `url` to be a nats:// or tls:// URL, got `"redis://x"` (string)'],
    [
      { url, queue: 'q', prefix: 'a_b' },
      'Expected `prefix` to be a name of letters, digits and `-`, got `"a_b"` (string)',
    ],
  ])('createNatsQueue(%j) throws a TypeError', (options, message) => {
    expect(() => createNatsQueue(options as never)).toThrow(new TypeError(message));
  });
});

describe('queue names', () => {
  // Every stream a queue makes: its entries' and its progress's (JetStream's namespace is flat).
  const streamsOf = (queue: string): string[] => [
    `x_${encodeQueueName(queue)}`,
    `x_${encodeQueueName(queue)}_progress`,
  ];

  it("encodes names injectively: `a.b`, `a_b` and the like never share a stream, nor one another queue's progress", () => {
    const names = [
      'a.b',
      'a_b',
      'a__b',
      'a_2eb',
      'a-b',
      'ab',
      'a b',
      'a/b',
      'a_',
      'a',
      'a_progress',
      'Qwen2.5-0.5B',
      'é',
      '_c3_a9',
    ];
    const streams = names.flatMap(streamsOf);
    expect(new Set(streams).size).toBe(streams.length);
    expect(encodeQueueName('tinystories-656k')).toBe('tinystories-656k');
    expect(encodeQueueName('Qwen2.5-0.5B')).toBe('Qwen2_2e5-0_2e5B');
    // Valid subject tokens and stream names: no `.`, `*`, `>`, white space or path separator.
    for (const name of names) expect(encodeQueueName(name)).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it("accepts names that used to be refused (a model's name with dots)", async () => {
    const queue = createNatsQueue({ url, queue: 'Qwen2.5-0.5B' });
    await queue.close();
    expect(() => checkQueueName('a.b')).not.toThrow();
  });

  it('refuses a name whose streams JetStream would refuse (too long), naming the limit, in the queue and the worker', () => {
    const longest = MAX_STREAM_NAME - 'microbatch__progress'.length;
    expect(() => checkQueueName('q'.repeat(longest))).not.toThrow();
    const message =
      "Expected `queue` to be a name whose NATS streams fit JetStream's 255 characters: " +
      "`<prefix>_<queue>_progress` would be 320 characters (300 in the queue's name; a character other than a " +
      'letter, a digit or `-` takes 2 or more)';
    expect(() => checkQueueName('q'.repeat(longest + 1))).toThrow(TypeError);
    expect(() => createNatsQueue({ url, queue: 'q'.repeat(300) })).toThrow(new TypeError(message));
    expect(() => createNatsWorker({ url, queue: 'q'.repeat(300), handlers })).toThrow(new TypeError(message));
    // Escaped characters count as encoded: 80 dots are 240 characters.
    expect(() => checkQueueName('.'.repeat(80))).toThrow(/would be 260 characters \(80 in the queue's name/);
  });
});
