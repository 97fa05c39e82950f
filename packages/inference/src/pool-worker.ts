import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { ItemResult, RunMessage, StepSlot, WorkerInit, WorkerMessage } from './protocol.js';

// Both src/*.ts (tests, via vitest) and the bundled dist/index.{js,cjs} sit one folder below the package root,
// so this one URL finds the BUILT worker either way; Node 20 cannot start a worker from a .ts file.
const WORKER_URL = new URL('../dist/worker.js', import.meta.url);

/** The path of the worker script; throws with the fix when the package has not been built. */
export function workerScript(): URL {
  if (!existsSync(WORKER_URL)) {
    throw new Error(
      `@microbatch/inference: worker script not found at ${fileURLToPath(WORKER_URL)}; ` +
        'build it with `pnpm --filter @microbatch/inference build` (the root `pnpm install` does)',
    );
  }
  return WORKER_URL;
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
  /** The worker exited without being asked to; `task` is the batch it was running, if any. */
  crashed(worker: PoolWorker, error: BatchError, task: Task | undefined): void;
  idle(worker: PoolWorker): void;
}

type State = 'loading' | 'idle' | 'busy' | 'retiring' | 'gone';

/** One worker thread: loads the model once, then runs one batch at a time. */
export class PoolWorker {
  readonly index: number;
  readonly #worker: Worker;
  readonly #events: PoolWorkerEvents;
  readonly #model: string;
  readonly #cancel = new Int32Array(new SharedArrayBuffer(4));
  #state: State = 'loading';
  #task: Task | undefined;
  #uncaught: unknown;
  #onIdle: (() => void)[] = [];
  #retired: Promise<void> | undefined;

  constructor(index: number, init: Omit<WorkerInit, 'cancel'>, events: PoolWorkerEvents) {
    this.index = index;
    this.#events = events;
    this.#model = init.spec.model;
    const data: WorkerInit = { ...init, cancel: this.#cancel.buffer as SharedArrayBuffer };
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

  /** The batch it is running. */
  get current(): Task | undefined {
    return this.#task;
  }

  /** Sends a batch; the worker must be idle. A batch that cannot be cloned rejects without touching the worker. */
  run(task: Task): void {
    const message: RunMessage = { type: 'run', id: task.id, inputs: task.inputs, stream: task.stream };
    Atomics.store(this.#cancel, 0, 0);
    try {
      this.#worker.postMessage(message);
    } catch (error) {
      task.reject(new BatchError(ErrorCode.INVALID_INPUT, `Inputs cannot be sent to the inference worker: ${String(error)}`, { cause: error }));
      return;
    }
    this.#state = 'busy';
    this.#task = task;
    // Only a busy or loading worker keeps the process alive; an idle pool must not block a clean exit.
    this.#worker.ref();
  }

  /**
   * Asks the worker to stop its batch at the next step (the batch's result is no longer wanted). It stays busy until
   * it reports back, then takes the next batch; one that never does must be terminated.
   */
  cancel(): void {
    Atomics.store(this.#cancel, 0, 1);
  }

  /**
   * Takes the worker out of service: it is asked to stop its batch and terminated once it reports back (between two
   * native calls, where terminating is safe) or after `graceMs`. No event is reported for it any more. Resolves
   * once it has exited.
   */
  retire(graceMs: number): Promise<void> {
    if (this.#retired === undefined) {
      this.cancel();
      const wasBusy = this.#state === 'busy';
      this.#task = undefined;
      this.#state = 'retiring';
      this.#retired = new Promise<void>((resolve) => {
        this.#worker.once('exit', () => resolve());
      });
      if (wasBusy) {
        const timer = setTimeout(() => this.#stop(), graceMs);
        timer.unref();
        void this.#retired.then(() => clearTimeout(timer));
      } else this.#stop();
    }
    return this.#retired;
  }

  #stop(): void {
    this.#state = 'gone';
    void this.#worker.terminate();
  }

  /** Resolves once the worker is not running a batch (it reported back or exited), or after `timeoutMs`. */
  idle(timeoutMs: number): Promise<void> {
    if (this.#state !== 'busy') return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.#onIdle.push(done);
    });
  }

  #wake(): void {
    for (const done of this.#onIdle.splice(0)) done();
  }

  /** Stops the worker; its batch (if any) is handed back, unsettled, for the caller to settle. */
  terminate(): { readonly task: Task | undefined; readonly exited: Promise<number> } {
    const task = this.#task;
    this.#task = undefined;
    this.#state = 'gone';
    return { task, exited: this.#worker.terminate() };
  }

  #onMessage(message: WorkerMessage): void {
    if (this.#state === 'gone') return;
    if (this.#state === 'retiring') {
      // Its batch is over: terminating now cannot interrupt a native call.
      if (message.type === 'result' || message.type === 'failed') this.#stop();
      return;
    }
    switch (message.type) {
      case 'ready':
        this.#state = 'idle';
        this.#worker.unref();
        this.#events.ready(this);
        return;
      case 'load-error':
        this.#state = 'gone';
        void this.#worker.terminate();
        this.#events.loadFailed(this, new BatchError(ErrorCode.UNAVAILABLE, message.message, { cause: message, expose: false }));
        return;
      case 'step':
        if (this.#task?.id === message.id) this.#task.onStep?.(message.slots);
        return;
      case 'result':
      case 'failed': {
        const task = this.#task;
        if (task?.id !== message.id) return;
        this.#task = undefined;
        this.#state = 'idle';
        this.#worker.unref();
        this.#wake();
        if (message.type === 'result') task.resolve(message.results);
        else task.reject(toBatchError(message.error.message, message.error));
        this.#events.idle(this);
      }
    }
  }

  #onExit(code: number): void {
    this.#wake();
    if (this.#state === 'gone' || this.#state === 'retiring') {
      this.#state = 'gone';
      return;
    }
    const loading = this.#state === 'loading';
    const task = this.#task;
    this.#state = 'gone';
    this.#task = undefined;
    const cause = this.#uncaught;
    const reason = cause instanceof Error ? `threw ${cause.name}: ${cause.message}` : `exited with code ${code}`;
    if (loading) {
      const message = `Inference worker ${this.index} ${reason} while loading the model from "${this.#model}"`;
      this.#events.loadFailed(this, new BatchError(ErrorCode.UNAVAILABLE, message, { cause, expose: false }));
      return;
    }
    const during = task === undefined ? 'while idle' : `while running a batch of ${task.inputs.length}`;
    const message = `Inference worker ${this.index} crashed (${reason}) ${during}; it is being replaced`;
    this.#events.crashed(this, new BatchError(ErrorCode.UNAVAILABLE, message, { cause, retryAfterSeconds: 1, expose: false }), task);
  }
}

/** A whole-batch failure reported by the worker; its message names what failed but is not shown to clients. */
function toBatchError(message: string, cause: unknown): BatchError {
  return new BatchError(ErrorCode.HANDLER_ERROR, `Inference failed in the worker: ${message}`, { cause });
}
