// The worker-thread entry (built to dist/worker.js). onnxruntime-node blocks its thread for a whole run, so the
// model lives here and the main thread only posts batches and receives results.
import { parentPort, workerData } from 'node:worker_threads';
import { serializeError } from './protocol.js';
import type { RunMessage, StepSlot, TestHooks, WorkerInit, WorkerMessage } from './protocol.js';
import { loadRunner } from './runners/runner.js';
import type { Runner } from './runners/runner.js';

const init = workerData as WorkerInit;
const cancel = new Int32Array(init.cancel);
/** Whether the pool no longer wants the running batch. */
const cancelled = (): boolean => Atomics.load(cancel, 0) === 1;
if (parentPort === null) throw new Error('@microbatch/inference: worker.js must be started as a worker thread');
const port = parentPort;

const send = (message: WorkerMessage) => port.postMessage(message);

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
  try {
    if (init.hooks !== undefined) misbehave(init.hooks, inputs);
    const emit = stream ? (slots: readonly StepSlot[]) => send({ type: 'step', id, slots }) : undefined;
    const results = await runner.run(inputs, emit, cancelled);
    send({ type: 'result', id, results });
  } catch (error) {
    send({ type: 'failed', id, error: serializeError(error) });
  }
}

async function main(): Promise<void> {
  let runner: Runner;
  try {
    runner = await loadRunner(init);
  } catch (error) {
    const cause = error instanceof Error ? error.message : String(error);
    const message = `Failed to load the ${init.spec.task} model from "${init.spec.model}": ${cause}`;
    send(error instanceof Error && error.stack !== undefined ? { type: 'load-error', message, stack: error.stack } : { type: 'load-error', message });
    return;
  }
  // The pool sends one batch at a time to each worker, so handling messages as they come never overlaps runs.
  port.on('message', (message: RunMessage) => void handle(runner, message));
  send({ type: 'ready' });
}

void main();
