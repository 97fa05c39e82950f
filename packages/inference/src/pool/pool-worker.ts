import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { DecodeActivity } from '../contract/decode-activity.js';
import type { ItemResult, PoolMessage, StepSlot, WorkerInit, WorkerMessage } from '../contract/messages.js';

// The sources (src/pool/*.ts, run by vitest) sit two folders below the package root and the bundled
// dist/index.{js,cjs} one: both look for the BUILT worker, since Node 20 cannot start a worker from a .ts file.
const WORKER_URLS = [new URL('../dist/worker.js', import.meta.url), new URL('../../dist/worker.js', import.meta.url)];

/** The path of the worker script; throws with the fix when the package has not been built. */
export function workerScript(): URL {
  const found = WORKER_URLS.find((url) => existsSync(url));
  if (found === undefined) {
    throw new Error(
      `@microbatch/inference: worker script not found at ${fileURLToPath(WORKER_URLS[0] as URL)}; ` +
        'build it with `pnpm --filter @microbatch/inference build` (the root `pnpm install` does)',
    );
  }
  return found;
}

/** One batch on its way to a worker. */
export interface Task {
  readonly id: number;
  readonly inputs: readonly unknown[];
  readonly stream: boolean;
  readonly signal: AbortSignal | undefined;
  readonly onStep: ((slots: readonly StepSlot[]) => void) | undefined;
  readonly resolve: (results: readonly ItemResult[]) => void;
  readonly reject: (error: unknown) => void;
}

/** What the pool hears from a worker. */
export interface PoolWorkerEvents {
  ready(worker: PoolWorker): void;
  loadFailed(worker: PoolWorker, error: BatchError): void;
  /** The worker exited without being asked to; `tasks` are the batches it was running. */
  crashed(worker: PoolWorker, error: BatchError, tasks: readonly Task[]): void;
  /** The worker finished a batch and can take more. */
  idle(worker: PoolWorker): void;
  /** The worker's decode loop reported what it did (continuous text generation). */
  activity(activity: DecodeActivity): void;
}

type State = 'loading' | 'idle' | 'busy' | 'retiring' | 'gone';

/**
 * One worker thread: loads the model once, then runs batches. With request scheduling it runs one batch at a
 * time; with continuous scheduling (`capacity` > 0) it takes batches while their items fit its decode loop's
 * capacity, and they run merged.
 */
export class PoolWorker {
  readonly index: number;
  /** The most items in flight at once for a continuous worker; 0 for one batch at a time. */
  readonly capacity: number;
  readonly #worker: Worker;
  readonly #events: PoolWorkerEvents;
  readonly #model: string;
  readonly #cancel = new Int32Array(new SharedArrayBuffer(4));
  readonly #tasks = new Map<number, Task>();
  #load = 0;
  #state: State = 'loading';
  #uncaught: unknown;
  #onIdle: (() => void)[] = [];
  #retired: Promise<void> | undefined;
  #statsRequests = new Map<number, (stats: Readonly<Record<string, number>>) => void>();
  #nextStatsId = 1;

  constructor(index: number, init: Omit<WorkerInit, 'cancel'>, events: PoolWorkerEvents, capacity: number) {
    this.index = index;
    this.capacity = capacity;
    this.#events = events;
    this.#model = init.spec.model;
    const data: WorkerInit = { ...init, cancel: this.#cancel.buffer };
    this.#worker = new Worker(workerScript(), { workerData: data });
    this.#worker.on('message', (message: WorkerMessage) => this.#onMessage(message));
    this.#worker.on('error', (error) => {
      this.#uncaught = error;
    });
    this.#worker.on('exit', (code) => this.#onExit(code));
  }

  get state(): State {
    return this.#state;
  }

  /** Items in flight. */
  get load(): number {
    return this.#load;
  }

  /** The batches it is running. */
  get tasks(): readonly Task[] {
    return [...this.#tasks.values()];
  }

  has(task: Task): boolean {
    return this.#tasks.get(task.id) === task;
  }

  /** Whether it can start `task` now. */
  canTake(task: Task): boolean {
    if (this.#state !== 'idle' && this.#state !== 'busy') return false;
    if (this.#tasks.size === 0) return true;
    return this.capacity > 0 && this.#load + task.inputs.length <= this.capacity;
  }

  /** Sends a batch (see {@link canTake}). A batch that cannot be cloned rejects without touching the worker. */
  run(task: Task): void {
    const message: PoolMessage = { type: 'run', id: task.id, inputs: task.inputs, stream: task.stream };
    if (this.capacity === 0) Atomics.store(this.#cancel, 0, 0);
    try {
      this.#worker.postMessage(message);
    } catch (error) {
      task.reject(
        new BatchError(ErrorCode.INVALID_INPUT, `Inputs cannot be sent to the inference worker: ${String(error)}`, {
          cause: error,
        }),
      );
      return;
    }
    this.#state = 'busy';
    this.#tasks.set(task.id, task);
    this.#load += task.inputs.length;
    this.#updateRef();
  }

  /**
   * Asks the worker to stop a batch at its next step (its result is no longer wanted). The batch keeps its place
   * until the worker reports back; a continuous worker's other batches carry on.
   */
  cancel(task?: Task): void {
    if (this.capacity === 0) Atomics.store(this.#cancel, 0, 1);
    const targets = task === undefined ? [...this.#tasks.values()] : [task];
    if (this.capacity > 0) for (const target of targets) this.#post({ type: 'cancel', id: target.id });
  }

  /** Resolves once the worker reported back on `task` (or no longer runs it), or after `timeoutMs` with false. */
  settled(task: Task, timeoutMs: number): Promise<boolean> {
    if (!this.has(task) || this.#state === 'gone') return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.has(task) && this.#state !== 'gone') {
          this.#onIdle.push(check);
          return;
        }
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#onIdle = this.#onIdle.filter((callback) => callback !== check);
        resolve(!this.has(task));
      }, timeoutMs);
      timer.unref();
      this.#onIdle.push(check);
    });
  }

  /** Asks the worker's runner for its counters. */
  runnerStats(): Promise<Readonly<Record<string, number>>> {
    if (this.#state !== 'idle' && this.#state !== 'busy') return Promise.resolve({});
    const id = this.#nextStatsId++;
    return new Promise((resolve) => {
      this.#statsRequests.set(id, resolve);
      this.#updateRef();
      this.#post({ type: 'stats', id });
    });
  }

  /**
   * Takes the worker out of service: it is asked to stop its batches and terminated once it reports back on all of
   * them (between two native calls, where terminating is safe) or after `graceMs`. No event is reported for it
   * any more. Resolves once it has exited.
   */
  retire(graceMs: number): Promise<void> {
    if (this.#retired === undefined) {
      this.cancel();
      const wasBusy = this.#state === 'busy';
      this.#state = 'retiring';
      this.#retired = new Promise<void>((resolve) => {
        this.#worker.once('exit', () => resolve());
      });
      if (wasBusy && this.#tasks.size > 0) {
        const timer = setTimeout(() => this.#stop(), graceMs);
        timer.unref();
        void this.#retired.then(() => clearTimeout(timer));
      } else this.#stop();
    }
    return this.#retired;
  }

  #stop(): void {
    this.#state = 'gone';
    this.#tasks.clear();
    this.#load = 0;
    void this.#worker.terminate();
  }

  /** Resolves once the worker runs no batch (it reported back or exited), or after `timeoutMs`. */
  idle(timeoutMs: number): Promise<void> {
    if (this.#state !== 'busy') return Promise.resolve();
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.#state === 'busy') {
          this.#onIdle.push(check);
          return;
        }
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#onIdle = this.#onIdle.filter((callback) => callback !== check);
        resolve();
      }, timeoutMs);
      this.#onIdle.push(check);
    });
  }

  #wake(): void {
    for (const done of this.#onIdle.splice(0)) done();
  }

  /** Stops the worker; its batches are handed back, unsettled, for the caller to settle. */
  terminate(): { readonly tasks: readonly Task[]; readonly exited: Promise<number> } {
    const tasks = [...this.#tasks.values()];
    this.#tasks.clear();
    this.#load = 0;
    this.#state = 'gone';
    return { tasks, exited: this.#worker.terminate() };
  }

  /** Only a loading worker, or one with work or a question pending, keeps the process alive. */
  #updateRef(): void {
    if (this.#state === 'loading' || this.#tasks.size > 0 || this.#statsRequests.size > 0) this.#worker.ref();
    else this.#worker.unref();
  }

  #post(message: PoolMessage): void {
    try {
      this.#worker.postMessage(message);
    } catch {
      // A worker that is exiting cannot take messages; its exit settles everything.
    }
  }

  #onMessage(message: WorkerMessage): void {
    if (this.#state === 'gone') return;
    if (message.type === 'batch') {
      for (const inner of message.messages) this.#onMessage(inner);
      return;
    }
    if (message.type === 'activity') {
      this.#events.activity(message.activity);
      return;
    }
    if (message.type === 'stats') {
      const resolve = this.#statsRequests.get(message.id);
      this.#statsRequests.delete(message.id);
      this.#updateRef();
      resolve?.(message.stats);
      return;
    }
    if (this.#state === 'retiring') {
      if (message.type === 'result' || message.type === 'failed') {
        this.#forget(message.id);
        // Its batches are over: terminating now cannot interrupt a native call.
        if (this.#tasks.size === 0) this.#stop();
      }
      return;
    }
    switch (message.type) {
      case 'ready':
        this.#state = 'idle';
        this.#updateRef();
        this.#events.ready(this);
        return;
      case 'load-error':
        this.#state = 'gone';
        void this.#worker.terminate();
        this.#events.loadFailed(
          this,
          new BatchError(ErrorCode.UNAVAILABLE, message.message, { cause: message, expose: false }),
        );
        return;
      case 'step':
        this.#tasks.get(message.id)?.onStep?.(message.slots);
        return;
      case 'result':
      case 'failed': {
        const task = this.#forget(message.id);
        if (task === undefined) return;
        if (this.#tasks.size === 0) this.#state = 'idle';
        this.#updateRef();
        this.#wake();
        if (message.type === 'result') task.resolve(message.results);
        else task.reject(toBatchError(message.error.message, message.error));
        this.#events.idle(this);
      }
    }
  }

  #forget(id: number): Task | undefined {
    const task = this.#tasks.get(id);
    if (task === undefined) return undefined;
    this.#tasks.delete(id);
    this.#load -= task.inputs.length;
    return task;
  }

  #onExit(code: number): void {
    for (const resolve of this.#statsRequests.values()) resolve({});
    this.#statsRequests.clear();
    if (this.#state === 'gone' || this.#state === 'retiring') {
      this.#state = 'gone';
      this.#wake();
      return;
    }
    const loading = this.#state === 'loading';
    const tasks = [...this.#tasks.values()];
    this.#state = 'gone';
    this.#tasks.clear();
    this.#load = 0;
    this.#wake();
    const cause = this.#uncaught;
    const reason = cause instanceof Error ? `threw ${cause.name}: ${cause.message}` : `exited with code ${code}`;
    if (loading) {
      const message = `Inference worker ${this.index} ${reason} while loading the model from "${this.#model}"`;
      this.#events.loadFailed(this, new BatchError(ErrorCode.UNAVAILABLE, message, { cause, expose: false }));
      return;
    }
    const items = tasks.reduce((sum, task) => sum + task.inputs.length, 0);
    const during =
      tasks.length === 0
        ? 'while idle'
        : tasks.length === 1
          ? `while running a batch of ${items}`
          : `while running ${tasks.length} batches (${items} items)`;
    const message = `Inference worker ${this.index} crashed (${reason}) ${during}; it is being replaced`;
    this.#events.crashed(
      this,
      new BatchError(ErrorCode.UNAVAILABLE, message, { cause, retryAfterSeconds: 1, expose: false }),
      tasks,
    );
  }
}

/** A whole-batch failure reported by the worker; its message names what failed but is not shown to clients. */
function toBatchError(message: string, cause: unknown): BatchError {
  return new BatchError(ErrorCode.HANDLER_ERROR, `Inference failed in the worker: ${message}`, { cause });
}
