// A worker's streamed steps as the batcher's streaming handler sees them: one slot per input per step, and an END
// right after an item's final chunk.
import { BatchError, END, SKIP } from '@microbatch/core';
import type { StreamSlot } from '@microbatch/core';
import { ItemStream } from '@microbatch/core/util';
import type { SerializedError, StepSlot } from '../contract/messages.js';

/** A worker's item error as the `BatchError` callers see. */
export function itemError(error: SerializedError): BatchError {
  return new BatchError(
    error.code,
    error.message,
    error.field === undefined ? {} : { details: { field: error.field } },
  );
}

/**
 * Runs `submit` (which reports each step to `onStep` and settles when the batch is over) and yields its steps as
 * stream slots. A final chunk ends its item's stream at once instead of when the slowest item of the batch is done.
 */
export async function* streamSteps<C>(
  submit: (onStep: (slots: readonly StepSlot[]) => void) => Promise<unknown>,
): AsyncGenerator<StreamSlot<C>[]> {
  // Pushes never wait: a slow consumer only delays its own stream, never the worker.
  const channel = new ItemStream<readonly StepSlot[]>();
  submit((slots) => channel.push(slots)).then(
    () => channel.end(),
    (error: unknown) => channel.fail(error),
  );
  try {
    for await (const slots of channel) {
      const finished = new Set<number>();
      yield slots.map((slot, index): StreamSlot<C> => {
        if (slot === null) return SKIP;
        if ('error' in slot) return itemError(slot.error);
        if ((slot.chunk as { finish_reason?: unknown }).finish_reason != null) finished.add(index);
        return slot.chunk as C;
      });
      if (finished.size > 0) yield slots.map((_, index) => (finished.has(index) ? END : SKIP));
    }
  } finally {
    void channel.return();
  }
}
