// A text-completion service over real batchers whose batches wait for the test, on an injected clock: what the
// app tests need to hold a batch running, fill a queue and see the service's own refusals through real servers.
import { createBatcher } from '@microbatch/core';
import type { TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { ManualClock, waitFor } from '@microbatch/test-kit';
import { FAKE_USAGE as usage, fakeTextService } from './fake-text-service.js';

/** How long one batch takes on the service's clock. */
export const BATCH_MS = 100;

/** A service whose batches (one request each) take {@link BATCH_MS} on `clock`, finishing when the test says. */
export function gatedService(options: { readonly maxLatencyMs?: number; readonly maxQueueSize?: number }) {
  const clock = new ManualClock();
  const gates: Array<() => void> = [];
  const generate = createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> => {
      await new Promise<void>((resolve) => gates.push(resolve));
      return inputs.map(() => ({ text: 'done', finish_reason: 'length', usage }));
    },
    { name: 'generate', maxBatchSize: 1, maxConcurrentBatches: 1, clock, ...options },
  );
  const service = fakeTextService(generate);
  /** Ends the running batch after {@link BATCH_MS} of the clock. */
  const finishOne = async (): Promise<void> => {
    await waitFor('a running batch', () => gates.length > 0);
    await clock.advance(BATCH_MS);
    gates.shift()?.();
  };
  return { service, generate, finishOne, gates };
}
