// Trace context through the queue: the replica writes each call's context into its entry (field `c`, the tracer's
// carrier as JSON: W3C `traceparent` / `tracestate` with `@microbatch/core/otel`), the worker reads it back for its
// batch's span. The tracers do the tracing; this file only carries their context.
import type { BatchOutcome, BatchSpan, BatchTracer, RemoteBatch, SentItem } from '@microbatch/core';

/** A call's trace on the replica: the carrier its entry holds ('' for none) and the tracer's handle on it. */
export interface ItemTrace {
  readonly field: string;
  readonly sent: SentItem | undefined;
}

const NO_TRACE: ItemTrace = { field: '', sent: undefined };

/**
 * The caller's trace, captured synchronously in its context (at the call): the tracer's span for the item's time
 * on the queue and the context to send with the entry. Nothing without a tracer, or with one that does not `send`.
 */
export function traceItem(tracer: BatchTracer | undefined, batcher: string): ItemTrace {
  if (tracer?.send === undefined) return NO_TRACE;
  const sent = tracer.send(tracer.capture(), { batcher });
  if (sent === undefined) return NO_TRACE;
  return { field: Object.keys(sent.carrier).length === 0 ? '' : JSON.stringify(sent.carrier), sent };
}

/** The started notice for an item's trace, from the worker's batch as it reported it. */
export function remoteBatch(id: string, size: number, queueMs: number): RemoteBatch {
  return { batchId: id, size, queueWaitMs: queueMs };
}

/** What the worker's tracer makes of an entry's carrier field: a caller for its batch span, or `undefined`. */
export function callerOf(tracer: BatchTracer, field: string | undefined): unknown {
  if (field === undefined || field === '' || tracer.extract === undefined) return undefined;
  let carrier: unknown;
  try {
    carrier = JSON.parse(field);
  } catch {
    return undefined; // Not ours to fail an item over: its trace is lost, its work is not.
  }
  if (typeof carrier !== 'object' || carrier === null || Array.isArray(carrier)) return undefined;
  const strings = Object.entries(carrier).filter((pair): pair is [string, string] => typeof pair[1] === 'string');
  return tracer.extract(Object.fromEntries(strings));
}

/** One worker batch as its tracer follows it: started before the handler runs, ended once with its outcome. */
export interface WorkerBatchTrace {
  /** Runs the handler call in the batch span's context. */
  run<T>(call: () => Promise<T>): Promise<T>;
  end(outcome: BatchOutcome): void;
}

const UNTRACED: WorkerBatchTrace = { run: (call) => call(), end: () => undefined };

/**
 * Starts a worker batch's span (`microbatch.batch HANDLER` with `@microbatch/core/otel`), linked to (one call:
 * the child of) the context each entry carried from its replica.
 */
export function traceWorkerBatch(
  tracer: BatchTracer | undefined,
  batch: {
    readonly handler: string;
    readonly sequence: number;
    readonly maxBatchSize: number;
    readonly carriers: ReadonlyArray<string | undefined>;
    readonly queueTimesMs: readonly number[];
  },
): WorkerBatchTrace {
  if (tracer === undefined) return UNTRACED;
  let callers: unknown[] | undefined;
  const span: BatchSpan | undefined = tracer.startBatch({
    batcher: batch.handler,
    batchId: batch.sequence,
    size: batch.carriers.length,
    maxBatchSize: batch.maxBatchSize,
    key: undefined,
    get callers() {
      callers ??= batch.carriers.map((field) => callerOf(tracer, field));
      return callers;
    },
    queueTimesMs: batch.queueTimesMs,
  });
  if (span === undefined) return UNTRACED;
  return {
    run<T>(call: () => Promise<T>): Promise<T> {
      if (span.enter === undefined) return call();
      let running!: Promise<T>;
      span.enter(() => {
        running = call();
      });
      return running;
    },
    end: (outcome) => span.end(outcome),
  };
}
