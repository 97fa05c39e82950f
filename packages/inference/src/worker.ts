// The worker-thread entry (built to dist/worker.js). onnxruntime-node blocks its thread for a whole run, so the
// model lives here and the main thread only posts batches and receives results.
import { parentPort, workerData } from 'node:worker_threads';
import { serializeError } from './contract/errors.js';
import type { PoolMessage, RunMessage, StepSlot, TestHooks, WorkerInit, WorkerMessage } from './contract/messages.js';
import { loadRunner } from './runners/load-runner.js';
import type { Runner } from './runners/runner.js';

const init = workerData as WorkerInit;
const cancel = new Int32Array(init.cancel);
/** Runs the pool no longer wants: set by `cancel` messages (continuous scheduling runs several at once). */
const cancelledRuns = new Set<number>();
const activeRuns = new Set<number>();
if (parentPort === null) throw new Error('@microbatch/inference: worker.js must be started as a worker thread');
const port = parentPort;

// Messages go out in one postMessage per turn of the event loop: a decode step of continuous generation streams a
// chunk for every row and answers several requests, and one message costs both threads less than dozens.
// Buffers a runner gave up (`transferables`) move with the message instead of being copied.
let outbox: WorkerMessage[] = [];
let moved: ArrayBuffer[] = [];
function flush(): void {
  const messages = outbox;
  const transfer = moved;
  outbox = [];
  moved = [];
  port.postMessage(messages.length === 1 ? messages[0] : { type: 'batch', messages }, transfer);
}
function send(message: WorkerMessage, transfer: readonly ArrayBuffer[] = []): void {
  moved.push(...transfer);
  if (outbox.push(message) === 1) setImmediate(flush);
}

/** Test-only misbehaviour (see `createWorkerPoolForTesting`); `hooks` is undefined in every real pool. */
function misbehave(hooks: TestHooks, inputs: readonly unknown[]): void {
  const json = JSON.stringify(inputs);
  if (hooks.exitOn !== undefined && json.includes(hooks.exitOn)) process.exit(70);
  if (hooks.throwOn !== undefined && json.includes(hooks.throwOn)) {
    setImmediate(() => {
      throw new Error(`test hook: uncaught exception for ${hooks.throwOn}`);
    });
  }
  if (hooks.hangOn !== undefined && json.includes(hooks.hangOn)) for (;;);
}

async function handle(runner: Runner, message: RunMessage): Promise<void> {
  const { id, inputs, stream } = message;
  // The shared flag serves request scheduling (one run at a time); `cancel` messages name one run.
  const cancelled = (): boolean => cancelledRuns.has(id) || Atomics.load(cancel, 0) === 1;
  activeRuns.add(id);
  try {
    if (init.hooks !== undefined) misbehave(init.hooks, inputs);
    const emit = stream ? (slots: readonly StepSlot[]) => send({ type: 'step', id, slots }) : undefined;
    const results = await runner.run(inputs, emit, cancelled);
    send({ type: 'result', id, results }, runner.transferables?.(results));
  } catch (error) {
    send({ type: 'failed', id, error: serializeError(error) });
  } finally {
    activeRuns.delete(id);
    cancelledRuns.delete(id);
  }
}

async function main(): Promise<void> {
  let runner: Runner;
  try {
    runner = await loadRunner(init);
  } catch (error) {
    const cause = error instanceof Error ? error.message : String(error);
    const message = `Failed to load the ${init.spec.task} model from "${init.spec.model}": ${cause}`;
    send(
      error instanceof Error && error.stack !== undefined
        ? { type: 'load-error', message, stack: error.stack }
        : { type: 'load-error', message },
    );
    return;
  }
  runner.onActivity?.((activity) => send({ type: 'activity', activity }));
  // With request scheduling the pool sends one run at a time; with continuous scheduling runs overlap and the
  // runner merges them into its decode loop.
  port.on('message', (message: PoolMessage) => {
    switch (message.type) {
      case 'run':
        void handle(runner, message);
        return;
      case 'cancel':
        // A cancellation that crossed the run's result in flight names a run that is over: nothing to keep.
        if (activeRuns.has(message.id)) cancelledRuns.add(message.id);
        return;
      case 'stats':
        send({ type: 'stats', id: message.id, stats: runner.stats?.() ?? {} });
    }
  });
  send({ type: 'ready' });
}

void main();
