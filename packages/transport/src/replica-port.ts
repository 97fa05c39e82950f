// The port a transport's replica implements (see `ReplicaQueue`) and the replica's public shapes: its handle and
// batchers, its settings, how a broker answers an enqueue, one sample of the queue.
import type { Batcher, BatchTracer, CloseOptions, FleetLoad, StreamingBatcher } from '@microbatch/core';
import type { QueueSnapshot, WorkerSettings } from './batch-tally.js';
import type { QueueBatcherStats } from './queue-batcher.js';
import type { StatusListener } from './status.js';

/** A core `Batcher` whose `stats()` also samples the shared queue (see {@link QueueBatcherStats}). */
export interface TransportBatcher<I, O> extends Batcher<I, O> {
  stats(): QueueBatcherStats;
}
/** A core `StreamingBatcher` whose `stats()` also samples the shared queue (see {@link QueueBatcherStats}). */
export interface TransportStreamingBatcher<I, O> extends StreamingBatcher<I, O> {
  stats(): QueueBatcherStats;
}

/**
 * A web replica's handle on a shared queue (Redis, NATS): batchers whose items run on whichever worker pulls them.
 *
 * @example
 * ```ts
 * const queue = createRedisQueue({ url: 'redis://127.0.0.1:6379', queue: 'tinystories-656k' });
 * const generate = queue.batcher<TextGenerationInput, TextGenerationOutput>('generate');
 * ```
 */
export interface TransportQueue {
  /** This replica's id (the last part of its reply address). */
  readonly replicaId: string;
  /** Resolves once connected for the first time. */
  readonly ready: Promise<void>;
  /** A batcher whose items run on the workers' `handlers[name]`. */
  batcher<I, O>(name: string): TransportBatcher<I, O>;
  /** A streaming batcher whose items run on the workers' `streamingHandlers[name]`; values arrive as produced. */
  streamingBatcher<I, O>(name: string): TransportStreamingBatcher<I, O>;
  /** Whether the broker is reachable now. */
  isConnected(): boolean;
  /** How many workers were heard from within `heartbeatTtlMs`; 0 if the broker cannot be asked. */
  workersAlive(): Promise<number>;
  /** The whole queue as last sampled (every 50 ms at most): waiting, running, live workers. */
  snapshot(): QueueSnapshot;
  /**
   * The fleet's load now, for latency-aware and fair admission across replicas (serving's `ReplicaAdmission`):
   * the queue's waiting items, each live worker's latency fit and running batches, and the items in flight of each
   * fairness key across every replica (from the last sample, plus what this replica did since).
   */
  load(): FleetLoad;
  /** The longest deadline an item can have here (`timeoutMs`): an HTTP server's timeouts must be longer. */
  readonly timeoutMs: number;
  /** Connected and at least one worker alive: for readiness probes. */
  isReady(): Promise<boolean>;
  /** Closes every batcher (new calls `CLOSED`), waits for the items in flight, then disconnects. */
  close(options?: CloseOptions): Promise<void>;
}

/** The settings every transport's replica takes (checked, defaults filled in). */
export interface ReplicaSettings {
  readonly queue: string;
  readonly maxQueueSize: number;
  readonly timeoutMs: number;
  readonly heartbeatTtlMs: number;
  readonly workerGraceMs: number;
  readonly retryAfterSeconds: number;
  readonly onStatus?: StatusListener;
  readonly tracer?: BatchTracer;
}

/** How a broker answered an enqueue: the entries it added (by item), or why it refused the group. */
export interface Enqueued {
  /** Each item's entry id, `undefined` for one not added. */
  readonly entryIds: ReadonlyArray<string | undefined>;
  /**
   * Why the group was refused: no live worker, the shared bound (`full`: what is full, for the message), or the
   * broker's failure.
   */
  readonly refused?: { readonly noWorker: true } | { readonly full: string } | { readonly error: unknown };
}

/** One sample of the shared queue, as a broker reads it. */
export interface ReplicaSample {
  readonly waiting: number;
  readonly running: number;
  readonly workersAlive: number;
  readonly workerSettings: readonly WorkerSettings[];
  /** The other replicas' published loads (see `FleetView.published`). */
  readonly loads: readonly string[];
  /** This replica's own waiting items when the sample was asked for. */
  readonly ownWaiting: number;
  readonly clockOffsetMs: number;
}
