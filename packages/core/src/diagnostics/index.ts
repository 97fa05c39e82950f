// `@microbatch/core/diagnostics`: batches published on a Node `diagnostics_channel` tracing channel, for APM agents
// that subscribe to channels (as they do for undici, ioredis and mysql2). Node only: the main entry stays
// runtime-neutral.
import { tracingChannel } from 'node:diagnostics_channel';
import type { BatchOutcome, BatchSpan, BatchTracer, TracedBatch } from '../tracing.js';

/** The tracing channel's name: its events are `tracing:microbatch:batch:start`, `:end`, `:asyncStart`, `:asyncEnd`. */
export const BATCH_CHANNEL = 'microbatch:batch';

/** The message of each event of a batch, one object per batch (APM agents keep their span on it). */
export interface BatchMessage {
  readonly batcher: string;
  readonly batchId: number;
  readonly size: number;
  readonly maxBatchSize: number;
  readonly queueTimesMs: readonly number[];
  /** Set before `asyncStart` / `asyncEnd`: how the batch went. */
  outcome?: BatchOutcome;
}

const channel = tracingChannel<BatchMessage, BatchMessage>(BATCH_CHANNEL);

function subscribed(): boolean {
  return (
    channel.start.hasSubscribers ||
    channel.end.hasSubscribers ||
    channel.asyncStart.hasSubscribers ||
    channel.asyncEnd.hasSubscribers
  );
}

/**
 * A batcher `tracer` that publishes each batch on the `microbatch:batch` tracing channel: `start` when it is
 * dispatched (the handler call runs inside `start.runStores`, so an agent's `AsyncLocalStorage` binding applies to
 * the handler), `end` once the handler call has started, `asyncStart` and `asyncEnd` when the batch is over (with
 * `outcome` on the message). Costs nothing per call, and nothing per batch while no one subscribes.
 *
 * @example
 * ```ts
 * import { subscribe } from 'node:diagnostics_channel';
 * import { createBatcher } from '@microbatch/core';
 * import { diagnosticsTracer } from '@microbatch/core/diagnostics';
 *
 * const batcher = createBatcher(embed, { tracer: diagnosticsTracer() });
 * subscribe('tracing:microbatch:batch:asyncEnd', (message) => console.log(message));
 * ```
 */
export function diagnosticsTracer(): BatchTracer {
  return {
    capture: () => undefined,
    startBatch(batch: TracedBatch): BatchSpan | undefined {
      if (!subscribed()) return undefined;
      const { batcher, batchId, size, maxBatchSize, queueTimesMs } = batch;
      const message: BatchMessage = { batcher, batchId, size, maxBatchSize, queueTimesMs };
      return {
        enter(run: () => void): void {
          channel.start.runStores(message, run);
          channel.end.publish(message);
        },
        end(outcome: BatchOutcome): void {
          message.outcome = outcome;
          channel.asyncStart.publish(message);
          channel.asyncEnd.publish(message);
        },
      };
    },
  };
}
