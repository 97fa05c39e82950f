import { createBatcher } from '@microbatch/core';
import { deferred, waitFor } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';
import { type Logger, logBatches, logRefusals } from '../src/index.js';

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
