import { createBatcher } from '@microbatch/core';
import { deferred, waitFor } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';
import type { DecodeActivity } from '@microbatch/inference';
import { type Logger, logBatches, logDecodeLoop, logRefusals } from '../src/index.js';

/** A pino-compatible logger that records what it was given. */
function recordingLogger() {
  const records: Array<{ level: string; fields: object; message: string | undefined }> = [];
  const at = (level: string) => (fields: object, message?: string) => void records.push({ level, fields, message });
  const logger: Logger = { info: at('info'), warn: at('warn'), error: at('error') };
  return { logger, records };
}

describe('logBatches with a pino-compatible logger', () => {
  it('logs each batch as fields, not prose', async () => {
    const { logger, records } = recordingLogger();
    const batcher = createBatcher(async (inputs: string[]) => inputs, { name: 'echo' });
    logBatches(batcher, logger);
    await Promise.all([batcher('a'), batcher('b')]);
    expect(records).toEqual([
      {
        level: 'info',
        message: 'batch',
        fields: {
          batcher: 'echo',
          batchId: 1,
          batchSize: 2,
          queueWaitMs: expect.any(Number),
          maxQueueWaitMs: expect.any(Number),
          executionMs: expect.any(Number),
          failed: 0,
        },
      },
    ]);
  });
});

describe('logRefusals', () => {
  it('logs a burst of refusals once, with the count by reason', async () => {
    const lines: string[] = [];
    const gate = deferred();
    const batcher = createBatcher(
      async (inputs: number[]) => {
        await gate.promise;
        return inputs;
      },
      { name: 'busy', maxQueueSize: 1 },
    );
    logRefusals(batcher, (line) => lines.push(line), 10);
    const running = batcher(1);
    await waitFor('the first batch to start', () => batcher.inFlightBatches === 1);
    const queued = batcher(2);
    const refused = await Promise.allSettled([batcher(3), batcher(4), batcher(5)]);
    expect(refused.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected']);
    await waitFor('the refusal line', () => lines.length > 0);
    expect(lines).toEqual([
      expect.stringMatching(/^\[busy\] refused 3 requests in the last \d+\.\d s \(QUEUE_FULL 3\)$/),
    ]);
    gate.resolve();
    expect(await Promise.all([running, queued])).toEqual([1, 2]);
  });

  it('gives a pino-compatible logger the count and reasons as fields, and ignores refusals that are no overload', async () => {
    const { logger, records } = recordingLogger();
    const gate = deferred();
    const batcher = createBatcher(
      async (inputs: number[]) => {
        await gate.promise;
        return inputs;
      },
      { name: 'busy', maxQueueSize: 1 },
    );
    logRefusals(batcher, logger, 10);
    const running = batcher(1);
    await waitFor('the first batch to start', () => batcher.inFlightBatches === 1);
    const queued = batcher(2);
    await Promise.allSettled([batcher(3), batcher(4)]);
    await waitFor('the refusal record', () => records.length > 0);
    gate.resolve();
    await Promise.all([running, queued]);
    await batcher.close();
    await batcher(5).catch(() => undefined); // CLOSED: a shutdown, not an overload
    expect(records).toEqual([
      {
        level: 'warn',
        message: 'refused requests',
        fields: { batcher: 'busy', refused: 2, reasons: { QUEUE_FULL: 2 }, windowMs: expect.any(Number) },
      },
    ]);
  });
});

/** A decode-loop source whose reports the test sends by hand. */
function fakeLoop(name = 'inference') {
  const listeners = new Set<(activity: DecodeActivity) => void>();
  return {
    name,
    onDecodeActivity(listener: (activity: DecodeActivity) => void) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    report(activity: Partial<DecodeActivity>) {
      const cache = { prefixCacheLookups: 0, prefixCacheHits: 0, prefixCacheTokens: 0, prefixCacheEvictions: 0 };
      const counts = { worker: 0, ms: 5, steps: 0, stepsByRows: [], tokens: 0, joined: 0, left: 0 };
      const full = { ...counts, ...cache, prefixCacheBytes: 0, ...activity };
      for (const listener of listeners) listener(full);
    },
    get listening() {
      return listeners.size;
    },
  };
}

describe('logDecodeLoop', () => {
  it('sums the reports of an interval into one line: steps, rows per step, tokens/s, joins and leaves', async () => {
    const lines: string[] = [];
    const loop = fakeLoop();
    const stop = logDecodeLoop(loop, (line) => lines.push(line), 10);
    // Two workers' reports: steps of 1, 3 and 9 rows (mean (1 + 3 * 2 + 9) / 4 = 4).
    loop.report({ worker: 0, steps: 3, stepsByRows: [0, 1, 0, 2], tokens: 8, joined: 3 });
    loop.report({ worker: 1, steps: 1, stepsByRows: [0, 0, 0, 0, 0, 0, 0, 0, 0, 1], tokens: 9, joined: 9, left: 12 });
    await waitFor('the loop line', () => lines.length > 0);
    expect(lines).toEqual([
      expect.stringMatching(
        /^\[inference\] decode loop, last \d+\.\d s: 4 steps, 4\.0 rows per step \(max 9\), \d+ tokens\/s, 12 joined, 12 left$/,
      ),
    ]);
    // Quiet: no line. Stopping logs what the current window has seen, then nothing more is heard.
    loop.report({ steps: 1, stepsByRows: [0, 0, 1], tokens: 2, left: 2 });
    stop();
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/: 1 steps, 2\.0 rows per step \(max 2\), \d+ tokens\/s, 0 joined, 2 left$/);
    expect(loop.listening).toBe(0);
  });

  it('gives a pino-compatible logger the figures as fields', async () => {
    const { logger, records } = recordingLogger();
    const loop = fakeLoop('gen');
    const stop = logDecodeLoop(loop, logger, 10);
    loop.report({ ms: 1_000, steps: 2, stepsByRows: [0, 0, 2], tokens: 4, joined: 2, left: 2 });
    await waitFor('the loop record', () => records.length > 0);
    stop();
    expect(records).toEqual([
      {
        level: 'info',
        message: 'decode loop',
        fields: {
          pool: 'gen',
          windowMs: expect.any(Number),
          steps: 2,
          meanRows: 2,
          maxRows: 2,
          tokensPerSecond: expect.any(Number),
          joined: 2,
          left: 2,
        },
      },
    ]);
    // The window starts where the worker's report did: 4 tokens over at least its 1 s.
    const fields = records[0]?.fields as { tokensPerSecond: number } | undefined;
    expect(fields?.tokensPerSecond).toBeLessThanOrEqual(4);
  });
});
