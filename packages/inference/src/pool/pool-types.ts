import type { BatchHandler, StreamSlot, StreamingBatchHandler } from '@microbatch/core';
import type { DecodeActivity } from '../contract/decode-activity.js';
import type { RunnerSpec } from '../contract/runner-specs.js';

/**
 * Options of `createWorkerPool`; every one is validated once, when the pool is created.
 *
 * @example
 * ```ts
 * const options: WorkerPoolOptions<OnnxRunnerSpec> = { runner: { task: 'onnx', model: 'model.onnx' }, size: 2 };
 * ```
 */
export interface WorkerPoolOptions<S extends RunnerSpec = RunnerSpec> {
  /** What each worker loads and runs. */
  readonly runner: S;
  /**
   * How many workers (model copies) run batches at once. Give the batcher the same number as
   * `maxConcurrentBatches`: more batchers slots than workers only queue inside the pool.
   * @default 1
   */
  readonly size?: number;
  /**
   * The onnxruntime execution provider. Only `'cpu'` is available on a machine without GPU runtimes; others
   * (`'cuda'`, `'webgpu'`) make the model load fail, which rejects `ready`.
   * @default 'cpu'
   */
  readonly executionProvider?: string;
  /**
   * Intra-op threads per worker. Each worker already has its own thread, so 1 is usually best; raise it only
   * when cores outnumber workers.
   * @default 1
   */
  readonly threads?: number;
  /**
   * How long a worker may take to load its model before the load counts as failed.
   * @default 60000
   */
  readonly startTimeoutMs?: number;
  /**
   * A name for error messages.
   * @default 'inference'
   */
  readonly name?: string;
  /**
   * The most the pool queues for workers that are busy or loading, in the units of {@link WorkerPool.concurrency}
   * (requests for continuous text generation, batches otherwise); past it `run` and `stream` reject with
   * `QUEUE_FULL`. The default leaves room for five batchers given `pool.batcherOptions` sharing the pool (each sends
   * at most `concurrency`); feed it through batchers, whose queues have admission and fair shares.
   * @default 4 x concurrency
   */
  readonly maxQueueSize?: number;
}

/**
 * Options of one {@link WorkerPool.run} or {@link WorkerPool.stream} call.
 *
 * @example
 * ```ts
 * await pool.run(inputs, { signal: AbortSignal.timeout(5000) });
 * ```
 */
export interface RunOptions {
  /** Aborting it while the batch runs terminates the worker (its result is no longer wanted) and replaces it. */
  readonly signal?: AbortSignal;
}

/**
 * A snapshot of a pool's workers and queue.
 *
 * @example
 * ```ts
 * const { readyWorkers, crashes } = pool.stats();
 * ```
 */
export interface WorkerPoolStats {
  readonly size: number;
  /** Workers with a loaded model (idle or busy). */
  readonly readyWorkers: number;
  readonly busyWorkers: number;
  /** Batches waiting for a free worker (at most {@link WorkerPool.concurrency} units; see `run`). */
  readonly queueLength: number;
  /** Workers that died unexpectedly. */
  readonly crashes: number;
  /** Workers started to replace a crashed or aborted one. */
  readonly restarts: number;
  /** Items the workers are running now (for continuous text generation: sequences admitted to decode loops). */
  readonly runningItems: number;
}

/**
 * The batcher options a pool needs: give them to `createBatcher` / `createStreamingBatcher` (add your own
 * `batchWaitTimeoutMs`, `maxQueueSize`, timeouts).
 *
 * @example
 * ```ts
 * const generate = createBatcher(pool.handler, { ...pool.batcherOptions, name: 'generate' });
 * ```
 */
export interface PoolBatcherOptions<I> {
  /** `1` for continuous text generation: each request goes to the decode loop on its own. */
  readonly maxBatchSize?: number;
  /** The pool's {@link WorkerPool.concurrency}. */
  readonly maxConcurrentBatches: number;
  /** `textGenerationBatchKey` for request-level text generation (one `generate()` call per sampling setting). */
  readonly batchKey?: (input: I) => unknown;
}

/**
 * Worker threads that each hold one copy of a model and run whole batches off the main event loop.
 * `handler` / `streamingHandler` plug straight into `createBatcher` / `createStreamingBatcher`.
 *
 * @example
 * ```ts
 * app.get('/healthz', (req, res) => res.status(pool.isReady ? 200 : 503).end());
 * ```
 */
export interface WorkerPool<I, O, C = never> {
  readonly name: string;
  readonly size: number;
  /** Resolves once every worker has loaded the model; rejects (naming the model path) if one fails to. */
  readonly ready: Promise<void>;
  /** Whether at least one worker can run a batch now: for health checks. */
  readonly isReady: boolean;
  /** True once `close()` was called. */
  readonly closed: boolean;
  /** Whether the runner streams (then `stream()` and `streamingHandler` work). */
  readonly streams: boolean;
  /**
   * `'continuous'` for a text-generation runner with continuous scheduling (requests join and leave each worker's
   * decode loop step by step), `'request'` for every other runner (each batch runs on one worker to its end).
   */
  readonly scheduling: 'continuous' | 'request';
  /**
   * Why a text-generation pool whose `runner.scheduling` was left out runs under `'request'` scheduling: its decoder
   * graph has no KV cache for the continuous loop (the scheduling rules' fallback). A line to log; `undefined`
   * otherwise.
   */
  readonly schedulingFallback: string | undefined;
  /**
   * How much the workers take at once: `size` batches for request scheduling; for continuous, `size x (n + ceil(n/8))`
   * requests, where `n` is the runner's `maxSequences` (each worker decodes `n` of them and holds an eighth more,
   * ready to take a freed row at its next step). The pool queues up to `maxQueueSize` more (4 x `concurrency` by
   * default) for workers that are busy or still loading; past that `run` and `stream` reject with `QUEUE_FULL`
   * (503 with `Retry-After`). A batcher given {@link batcherOptions} never sends more than the workers take.
   */
  readonly concurrency: number;
  /** The batcher options this pool needs (`maxConcurrentBatches`, and `maxBatchSize` / `batchKey` by scheduling). */
  readonly batcherOptions: PoolBatcherOptions<I>;
  /**
   * Runs one batch on a free worker, waiting in the pool's queue if all are busy or loading; rejects with
   * `QUEUE_FULL` when its queue is full (`maxQueueSize`, in items for continuous scheduling, batches otherwise): feed
   * the pool through a batcher with {@link batcherOptions}, whose queue has admission and fairness.
   */
  run(inputs: readonly I[], options?: RunOptions): Promise<Array<O | Error>>;
  /** Runs one batch on a free worker and yields its steps: one slot per input each. */
  stream(inputs: readonly I[], options?: RunOptions): AsyncIterable<StreamSlot<C>[]>;
  /** `run` as a batch handler. */
  readonly handler: BatchHandler<I, O>;
  /** `stream` as a streaming batch handler. */
  readonly streamingHandler: StreamingBatchHandler<I, C>;
  stats(): WorkerPoolStats;
  /**
   * Listens to the decode loops of continuous text generation: each worker reports what its loop did a few times a
   * second while it runs (steps, rows per step, tokens, joins, leaves), and once when it goes idle. Never called for
   * other runners. Returns the function that stops listening.
   */
  onDecodeActivity(listener: (activity: DecodeActivity) => void): () => void;
  /**
   * Each worker's runner counters; for continuous text generation: `decodeSteps`, `decodedRows`, `prefillCalls`,
   * `joinedRunning` (newcomers merged into a running batch), `maxRows`, and ms in `decodeRunMs` / `prefillRunMs`
   * (session.run), `composeMs` (KV copies), `loopMs` (whole iterations), and the prefix cache's `prefixCacheLookups`,
   * `prefixCacheHits`, `prefixCacheTokens`, `prefixCacheEvictions` and `prefixCacheBytes`. `{}` for runners without
   * counters.
   */
  runnerStats(): Promise<Readonly<Record<string, number>>[]>;
  /** Rejects queued and running batches with `CLOSED` and terminates every worker. */
  close(): Promise<void>;
}
