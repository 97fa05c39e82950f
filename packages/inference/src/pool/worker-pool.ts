import { BatchError, ErrorCode } from '@microbatch/core';
import type { BatchHandler, StreamSlot, StreamingBatchHandler } from '@microbatch/core';
import { QUEUE_PER_CONCURRENCY, resolvePoolOptions } from './pool-options.js';
import type { ResolvedPoolOptions as Resolved } from './pool-options.js';
import { PoolWorker, workerScript } from './pool-worker.js';
import type { PoolWorkerEvents, Task } from './pool-worker.js';
import type { PoolBatcherOptions, RunOptions, WorkerPool, WorkerPoolOptions, WorkerPoolStats } from './pool-types.js';
import type { DecodeActivity } from '../contract/decode-activity.js';
import type { ItemResult, StepSlot, TestHooks, WorkerInit } from '../contract/messages.js';
import { resolveRunnerSpec, taskStreams, textGenerationBatchKey } from '../spec/runner-spec.js';
import { settingsWhere } from '../spec/scheduling-rules.js';
import { decoderScheduling } from '../runners/decoder-scheduling.js';
import type { ChunkOf, InputOf, OutputOf } from '../contract/task-types.js';
import type { ResolvedRunnerSpec, RunnerSpec, TextGenerationRunnerSpec } from '../contract/runner-specs.js';
import { itemError, streamSteps } from './step-stream.js';

/**
 * The runner spec resolved, with the scheduling a text-generation model runs under: a decoder graph without a KV
 * cache runs under request scheduling where none was asked for (the scheduling rules' fallback, `fallback` says
 * why), and one asked to run continuous throws. Decided before the batcher options and the capacity are.
 */
function resolveScheduling(runner: RunnerSpec): { spec: ResolvedRunnerSpec; fallback: string | undefined } {
  const spec = resolveRunnerSpec(runner);
  if (spec.task !== 'text-generation') return { spec, fallback: undefined };
  const raw = runner as unknown as Readonly<Record<string, unknown>>;
  const given = settingsWhere(() => true).filter((setting) => setting in spec && raw[setting] !== undefined);
  const choice = decoderScheduling({
    model: spec.model,
    dtype: spec.dtype,
    scheduling: raw.scheduling as typeof spec.scheduling | undefined,
    given,
  });
  if (choice.scheduling === spec.scheduling) return { spec, fallback: choice.fallback };
  // The user's spec (not the resolved one, whose loop settings are filled in) under the scheduling chosen.
  return {
    spec: resolveRunnerSpec({ ...(runner as TextGenerationRunnerSpec), scheduling: choice.scheduling }),
    fallback: choice.fallback,
  };
}

/** How long a worker asked to stop its batch may take before it is terminated. */
const CANCEL_GRACE_MS = 2_000;

/** The pool behind {@link createWorkerPool}; `hooks` is only ever set by `createWorkerPoolForTesting`. */
export class InferenceWorkerPool<I, O, C> implements WorkerPool<I, O, C> {
  readonly name: string;
  readonly size: number;
  readonly streams: boolean;
  readonly scheduling: 'continuous' | 'request';
  readonly schedulingFallback: string | undefined;
  readonly concurrency: number;
  readonly batcherOptions: PoolBatcherOptions<I>;
  readonly ready: Promise<void>;
  readonly handler: BatchHandler<I, O> = (inputs, context) => this.run(inputs, { signal: context.signal });
  readonly streamingHandler: StreamingBatchHandler<I, C> = (inputs, context) =>
    this.stream(inputs, { signal: context.signal });
  readonly #options: Resolved;
  readonly #init: Omit<WorkerInit, 'index' | 'cancel'>;
  readonly #workers: (PoolWorker | undefined)[];
  readonly #loadTimers = new Map<PoolWorker, NodeJS.Timeout>();
  /** Items a continuous worker holds at once (running or next in line); 0 for one batch at a time. */
  readonly #capacity: number;
  /** Workers whose batch was abandoned, finishing their current step before they are terminated. */
  readonly #retiring = new Set<PoolWorker>();
  /**
   * Continuous workers asked to drop a request that have not reported back yet. They take no new request meanwhile:
   * a healthy loop answers at its next step (milliseconds), and a hung one is replaced after CANCEL_GRACE_MS, so a
   * request sent to it then would fail with it instead of waiting for the replacement.
   */
  readonly #cancelling = new Map<PoolWorker, number>();
  #queue: Task[] = [];
  /** What the queue holds, in the units of `concurrency`: items for continuous scheduling, batches otherwise. */
  #queued = 0;
  readonly #maxQueueSize: number;
  readonly #activityListeners = new Set<(activity: DecodeActivity) => void>();
  #nextTaskId = 1;
  #startup: { pending: number; resolve: () => void; reject: (error: unknown) => void } | undefined;
  #unavailable: BatchError | undefined;
  #lastLoadFailure: BatchError | undefined;
  #closed = false;
  #crashes = 0;
  #restarts = 0;
  readonly #events: PoolWorkerEvents = {
    ready: (worker) => {
      this.#clearLoadTimer(worker);
      if (this.#startup !== undefined && --this.#startup.pending === 0) {
        this.#startup.resolve();
        this.#startup = undefined;
      }
      this.#dispatch();
    },
    loadFailed: (worker, error) => this.#onLoadFailed(worker, error),
    crashed: (worker, error, tasks) => {
      this.#crashes += 1;
      this.#workers[worker.index] = undefined;
      for (const task of tasks) task.reject(error);
      this.#replace(worker.index);
    },
    idle: () => this.#dispatch(),
    activity: (activity) => {
      for (const listener of this.#activityListeners) listener(activity);
    },
  };

  constructor(options: WorkerPoolOptions, hooks: TestHooks | undefined) {
    const { spec, fallback } = resolveScheduling(options?.runner);
    this.schedulingFallback = fallback;
    this.#options = resolvePoolOptions(options);
    workerScript();
    this.name = this.#options.name;
    this.size = this.#options.size;
    this.streams = taskStreams(spec.task);
    const continuous = spec.task === 'text-generation' && spec.scheduling === 'continuous';
    this.scheduling = continuous ? 'continuous' : 'request';
    // A continuous worker takes its loop's capacity and an eighth more: the few extra requests wait in the worker, so
    // a freed slot is refilled at the worker's next step instead of after a round trip through a busy main thread.
    // The rest wait in the batcher, where fair queuing and admission order them: with twice the capacity in the
    // worker, a light client's requests queued behind up to a loop's worth of heavy ones, first come first served
    // (`pnpm bench:fairness`: light p50 0.25 -> 0.05 s, p90 0.36 -> 0.11 s; the heavy client's tokens/s rose too).
    this.#capacity = continuous ? spec.maxSequences + Math.ceil(spec.maxSequences / 8) : 0;
    this.concurrency = continuous ? this.size * this.#capacity : this.size;
    this.#maxQueueSize = this.#options.maxQueueSize ?? QUEUE_PER_CONCURRENCY * this.concurrency;
    // Continuous: every request goes to the worker on its own the moment it is dispatched, so it joins the decode
    // loop at its next step and is answered the step it ends. Request-level: whole batches, split by sampling.
    this.batcherOptions = (
      continuous
        ? { maxBatchSize: 1, maxConcurrentBatches: this.concurrency }
        : spec.task === 'text-generation'
          ? { maxConcurrentBatches: this.size, batchKey: textGenerationBatchKey }
          : { maxConcurrentBatches: this.size }
    ) as PoolBatcherOptions<I>;
    this.#init = { spec, executionProvider: this.#options.executionProvider, threads: this.#options.threads, hooks };
    this.ready = new Promise<void>((resolve, reject) => {
      this.#startup = { pending: this.size, resolve, reject };
    });
    // A pool created only for its handler must not crash the process with an unhandled rejection.
    this.ready.catch(() => undefined);
    this.#workers = Array.from({ length: this.size }, () => undefined);
    for (let index = 0; index < this.size; index += 1) this.#spawn(index);
  }

  get isReady(): boolean {
    return !this.#closed && this.#workers.some((worker) => worker?.state === 'idle' || worker?.state === 'busy');
  }

  get closed(): boolean {
    return this.#closed;
  }

  run(inputs: readonly I[], options: RunOptions = {}): Promise<Array<O | Error>> {
    return this.#submit(inputs, options.signal, undefined).then((results) =>
      results.map((result) => (result.ok ? (result.value as O) : itemError(result.error))),
    );
  }

  stream(inputs: readonly I[], options: RunOptions = {}): AsyncIterable<StreamSlot<C>[]> {
    if (!this.streams) {
      throw new TypeError(`The ${this.#init.spec.task} runner does not stream; use \`run()\` / \`handler\``);
    }
    return this.#steps(inputs, options.signal);
  }

  stats(): WorkerPoolStats {
    const states = this.#workers.map((worker) => worker?.state);
    return {
      size: this.size,
      readyWorkers: states.filter((state) => state === 'idle' || state === 'busy').length,
      busyWorkers: states.filter((state) => state === 'busy').length,
      queueLength: this.#queue.length,
      runningItems: this.#workers.reduce((sum, worker) => sum + (worker?.load ?? 0), 0),
      crashes: this.#crashes,
      restarts: this.#restarts,
    };
  }

  onDecodeActivity(listener: (activity: DecodeActivity) => void): () => void {
    if (typeof listener !== 'function') {
      throw new TypeError(`Expected \`listener\` to be a function, got \`${String(listener)}\` (${typeof listener})`);
    }
    // Wrapped, so the same function subscribed twice is two subscriptions, each removed by its own call.
    const subscription = (activity: DecodeActivity): void => listener(activity);
    this.#activityListeners.add(subscription);
    return () => {
      this.#activityListeners.delete(subscription);
    };
  }

  async runnerStats(): Promise<Readonly<Record<string, number>>[]> {
    return Promise.all(this.#workers.map((worker) => worker?.runnerStats() ?? Promise.resolve({})));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const error = new BatchError(ErrorCode.CLOSED, `Worker pool "${this.name}" is closed`);
    this.#startup?.reject(error);
    this.#startup = undefined;
    this.#queued = 0;
    for (const task of this.#queue.splice(0)) task.reject(error);
    // Busy workers are asked to stop first: terminating one inside onnxruntime's native run aborts the process.
    const busy = this.#workers.filter(
      (worker): worker is PoolWorker => worker !== undefined && worker.tasks.length > 0,
    );
    for (const worker of busy) {
      for (const task of worker.tasks) task.reject(error);
      worker.cancel();
    }
    await Promise.all([
      ...busy.map((worker) => worker.idle(CANCEL_GRACE_MS)),
      ...[...this.#retiring].map((worker) => worker.retire(CANCEL_GRACE_MS)),
    ]);
    const exits: Promise<number>[] = [];
    for (const worker of this.#workers) {
      if (worker === undefined) continue;
      this.#clearLoadTimer(worker);
      const { tasks, exited } = worker.terminate();
      for (const task of tasks) task.reject(error);
      exits.push(exited);
    }
    this.#workers.fill(undefined);
    await Promise.all(exits);
  }

  #steps(inputs: readonly I[], signal: AbortSignal | undefined): AsyncGenerator<StreamSlot<C>[]> {
    return streamSteps<C>((onStep) => this.#submit(inputs, signal, onStep));
  }

  #submit(
    inputs: readonly I[],
    signal: AbortSignal | undefined,
    onStep: ((slots: readonly StepSlot[]) => void) | undefined,
  ): Promise<readonly ItemResult[]> {
    if (!Array.isArray(inputs)) return Promise.reject(new TypeError('Expected `inputs` to be an array'));
    if (this.#closed) return Promise.reject(new BatchError(ErrorCode.CLOSED, `Worker pool "${this.name}" is closed`));
    if (this.#unavailable !== undefined) return Promise.reject(this.#unavailable);
    if (signal?.aborted === true) return Promise.reject(signal.reason);
    if (inputs.length === 0) return Promise.resolve([]);
    // A caller that feeds the pool faster than batchers with `batcherOptions` do is refused here instead of growing
    // a queue without bound or admission. One batch larger than the bound may still wait alone.
    const units = this.#unitsOf(inputs.length);
    if (this.#queued > 0 && this.#queued + units > this.#maxQueueSize) {
      return Promise.reject(
        new BatchError(
          ErrorCode.QUEUE_FULL,
          `Worker pool "${this.name}" is full: ${this.#queued} ${this.scheduling === 'continuous' ? 'requests' : 'batches'} ` +
            `already wait for its workers (maxQueueSize ${this.#maxQueueSize}); feed it through a batcher with \`pool.batcherOptions\``,
          { retryAfterSeconds: 1 },
        ),
      );
    }
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const task: Task = {
        id: this.#nextTaskId++,
        inputs,
        stream: onStep !== undefined,
        signal,
        onStep,
        resolve: (results) => {
          if (!settle()) return;
          if (results.length !== inputs.length || results.includes(undefined as never)) {
            reject(
              new BatchError(
                ErrorCode.HANDLER_ERROR,
                `The runner returned ${results.length} results for ${inputs.length} inputs`,
              ),
            );
          } else resolve(results);
        },
        reject: (error) => {
          if (settle()) reject(error);
        },
      };
      const onAbort = () => this.#abort(task);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(task);
      this.#queued += units;
      this.#dispatch();
    });
  }

  #dispatch(): void {
    while (this.#queue.length > 0) {
      const task = this.#queue[0] as Task;
      // The least loaded worker that can take the batch now.
      let worker: PoolWorker | undefined;
      for (const candidate of this.#workers) {
        if (candidate === undefined || this.#cancelling.has(candidate)) continue;
        if (candidate.canTake(task) && (worker === undefined || candidate.load < worker.load)) worker = candidate;
      }
      if (worker === undefined) break;
      this.#queue.shift();
      this.#queued -= this.#unitsOf(task.inputs.length);
      worker.run(task);
    }
    const alive = this.#workers.some((worker) => worker !== undefined);
    if (!alive && this.#queue.length > 0) {
      const error =
        this.#unavailable ??
        new BatchError(
          ErrorCode.UNAVAILABLE,
          `Worker pool "${this.name}" has no worker left: ${this.#lastLoadFailure?.message}`,
          {
            cause: this.#lastLoadFailure,
            retryAfterSeconds: 1,
            expose: false,
          },
        );
      this.#queued = 0;
      for (const task of this.#queue.splice(0)) task.reject(error);
    }
  }

  /** A batch of `items` in the units of `concurrency`. */
  #unitsOf(items: number): number {
    return this.scheduling === 'continuous' ? items : 1;
  }

  /**
   * The batch's result is no longer wanted: drop it from the queue, or retire the worker that runs it and start a
   * replacement at once. The retired worker is asked to stop (text generation stops at its next token) and is
   * terminated once it reports back, between two native calls, or after CANCEL_GRACE_MS if it never does (a hang).
   * Terminating it at once is not safe: a worker terminated inside onnxruntime's native run aborts the whole
   * process (`terminate called after throwing an instance of 'Napi::Error'`).
   */
  #abort(task: Task): void {
    const reason: unknown = task.signal?.reason;
    const queued = this.#queue.indexOf(task);
    if (queued >= 0) {
      this.#queue.splice(queued, 1);
      this.#queued -= this.#unitsOf(task.inputs.length);
    }
    const worker = this.#workers.find((candidate) => candidate?.has(task) === true);
    task.reject(reason);
    if (worker === undefined) return;
    if (worker.capacity > 0) {
      this.#cancelInLoop(worker, task);
      return;
    }
    this.#workers[worker.index] = undefined;
    this.#retiring.add(worker);
    void worker.retire(CANCEL_GRACE_MS).then(() => this.#retiring.delete(worker));
    this.#replace(worker.index);
  }

  /**
   * A continuous worker drops a cancelled request at its next step and keeps the others running. One that does
   * not report back within CANCEL_GRACE_MS is stuck: it is terminated, its other batches fail with UNAVAILABLE,
   * and it is replaced.
   */
  #cancelInLoop(worker: PoolWorker, task: Task): void {
    worker.cancel(task);
    this.#cancelling.set(worker, (this.#cancelling.get(worker) ?? 0) + 1);
    void worker.settled(task, CANCEL_GRACE_MS).then((settled) => {
      const left = (this.#cancelling.get(worker) ?? 1) - 1;
      if (left > 0) this.#cancelling.set(worker, left);
      else this.#cancelling.delete(worker);
      if (settled || this.#workers[worker.index] !== worker) {
        this.#dispatch();
        return;
      }
      // Terminated on purpose, as a retired worker of request-level scheduling is: a restart, not a crash.
      this.#workers[worker.index] = undefined;
      const { tasks } = worker.terminate();
      const error = new BatchError(
        ErrorCode.UNAVAILABLE,
        `Inference worker ${worker.index} did not stop a cancelled request within ${CANCEL_GRACE_MS} ms; it is being replaced`,
        { retryAfterSeconds: 1, expose: false },
      );
      for (const other of tasks) other.reject(error);
      this.#replace(worker.index);
    });
  }

  #spawn(index: number): void {
    const worker = new PoolWorker(index, { ...this.#init, index }, this.#events, this.#capacity);
    this.#workers[index] = worker;
    const timer = setTimeout(() => {
      const { exited } = worker.terminate();
      void exited;
      const message = `Inference worker ${index} did not load the model from "${this.#init.spec.model}" within ${this.#options.startTimeoutMs} ms`;
      this.#onLoadFailed(worker, new BatchError(ErrorCode.UNAVAILABLE, message, { expose: false }));
    }, this.#options.startTimeoutMs);
    timer.unref();
    this.#loadTimers.set(worker, timer);
  }

  #replace(index: number): void {
    if (this.#closed || this.#unavailable !== undefined) return;
    this.#restarts += 1;
    this.#spawn(index);
  }

  #onLoadFailed(worker: PoolWorker, error: BatchError): void {
    this.#clearLoadTimer(worker);
    this.#lastLoadFailure = error;
    if (this.#workers[worker.index] === worker) this.#workers[worker.index] = undefined;
    if (this.#startup !== undefined) {
      // A model that cannot load at startup is a configuration error: fail fast instead of retrying forever.
      this.#unavailable = error;
      this.#startup.reject(error);
      this.#startup = undefined;
      for (const other of this.#workers) {
        if (other === undefined) continue;
        this.#clearLoadTimer(other);
        void other.terminate().exited;
      }
      this.#workers.fill(undefined);
    }
    // A replacement that cannot load stays down (no crash loop); the queue fails once no worker is left.
    this.#dispatch();
  }

  #clearLoadTimer(worker: PoolWorker): void {
    clearTimeout(this.#loadTimers.get(worker));
    this.#loadTimers.delete(worker);
  }
}

/**
 * Starts a pool of worker threads that each load the runner's model; batches run there, off the main event loop.
 * Give the batcher `pool.batcherOptions`: for continuous text generation each request then goes to a worker's decode
 * loop on its own the moment it is dispatched; for other runners every concurrent batch has a worker of its own.
 *
 * @example
 * ```ts
 * const pool = createWorkerPool({ runner: { task: 'text-generation', model: 'models/tinystories-656k' }, size: 2 });
 * await pool.ready;
 * const generate = createBatcher(pool.handler, { ...pool.batcherOptions, batchWaitTimeoutMs: 0 });
 * const { text } = await generate({ prompt: 'Once upon a time, ', max_new_tokens: 32, temperature: 0 });
 * ```
 */
export function createWorkerPool<S extends RunnerSpec>(
  options: WorkerPoolOptions<S>,
): WorkerPool<InputOf<S>, OutputOf<S>, ChunkOf<S>> {
  return new InferenceWorkerPool<InputOf<S>, OutputOf<S>, ChunkOf<S>>(options, undefined);
}
