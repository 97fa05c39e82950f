// The port a transport's worker implements (see `BrokerWorker`), and the worker's public shapes: its settings, its
// handle and stats, a batch's writes, progress records, refusals.
import type { BatchTracer } from '@microbatch/core';
import type { StatusListener } from './status.js';
import type { RequestEntry } from './wire.js';
import type { HandlerSettings } from './worker-batch.js';
import type { StreamResume, WorkerLog } from './worker-kit.js';

/** The settings every transport's worker runs with (checked, defaults filled in). */
export interface BrokerWorkerSettings extends HandlerSettings {
  readonly queue: string;
  readonly maxBatchSize: number;
  readonly concurrency: number;
  readonly batchWaitTimeoutMs: number;
  readonly maxDeliveries: number;
  readonly resumable: StreamResume<unknown, unknown> | undefined;
  readonly workerId: string | undefined;
  readonly log: WorkerLog;
  readonly onStatus: StatusListener | undefined;
  readonly tracer: BatchTracer | undefined;
}

/**
 * Counts since the worker started.
 *
 * @example
 * ```ts
 * const { batches, meanBatchSize } = worker.stats();
 * ```
 */
export interface WorkerStats {
  readonly batches: number;
  readonly items: number;
  readonly meanBatchSize: number;
  /** Batches running now. */
  readonly running: number;
  /** Entries dropped because their deadline had passed while queued (skipped at a pull, or swept). */
  readonly expired: number;
  /** Entries dropped because the web replica that queued them is gone (silent past its heartbeat TTL). */
  readonly orphaned: number;
  /** Entries taken over from a worker that stopped answering. */
  readonly reclaimed: number;
  /** Entries answered with an error after `maxDeliveries` deliveries. */
  readonly gaveUp: number;
}

/**
 * A model worker process's handle (Redis, NATS).
 *
 * @example
 * ```ts
 * const worker = createRedisWorker({ url, queue: 'tinystories-656k', handlers: { generate: pool.handler } });
 * process.once('SIGTERM', () => void worker.close());
 * ```
 */
export interface TransportWorker<S extends WorkerStats = WorkerStats> {
  /** The first half of this worker's batch ids (`<workerId>-<sequence>`). */
  readonly workerId: string;
  /** Resolves once the worker is connected and what it pulls from exists. */
  readonly ready: Promise<void>;
  stats(): S;
  /** Stops pulling, finishes (and answers) the batches it runs, then disconnects; idempotent. */
  close(): Promise<void>;
}

/** The chunk a progress record precedes: its reply data and the token ids it carries (from `offset`, `count` of them). */
export interface RecordedChunk {
  readonly data: string;
  readonly offset: number;
  readonly count: number;
}

/** A resumable stream's progress as stored: the token ids sent so far, and (NATS) the chunk the record preceded. */
export interface StreamProgress {
  readonly tokens: readonly number[];
  readonly chunk?: RecordedChunk | undefined;
}

/** One running batch's writes to the broker, each item's by its index in the batch. */
export interface BatchWriter {
  /** The start notices (each item's `START` reply fields): its replica learns at once that it runs. */
  start(notices: ReadonlyArray<readonly string[]>): Promise<void>;
  /** A chunk with no progress to record. */
  send(index: number, fields: readonly string[]): void;
  /** A resumable stream's chunk: its progress is recorded (`tokens`: its own ids, `sent`: every id so far) with it. */
  progress(
    index: number,
    fields: readonly string[],
    chunk: RecordedChunk & { readonly tokens: readonly number[] },
    sent: readonly number[],
  ): void;
  /** An item's final answer (result, end, or error). */
  final(index: number, fields: readonly string[]): void;
  /**
   * Once the handler is done: makes the answers durable and commits (acknowledges) the items answered. Resolves to
   * whether the answers reached the broker (a batch whose did not says nothing of how long batches take).
   */
  commit(): Promise<boolean>;
}

/** What {@link BrokerWorker.openBatch} is told of a batch. */
export interface OpenedBatch {
  readonly id: string;
  readonly entries: readonly RequestEntry[];
  /** Its chunks carry progress (a resumable streaming handler). */
  readonly resumable: boolean;
}

/** An entry that cannot run, with the reply fields of its error. */
export interface Refusal {
  readonly entry: RequestEntry;
  readonly fields: readonly string[];
}
