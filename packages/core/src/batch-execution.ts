import { BatchError, ErrorCode } from './errors.js';
import { type Item, ItemState, type RunningBatch } from './item.js';
import type { Settlement } from './settlement.js';
import { END, SKIP, type BatchContext, type OnBatchError } from './types.js';
import { describeValue as describe } from './util/describe-value.js';

export type AnyHandler = (inputs: unknown[], context: BatchContext) => unknown;

/** What the runner tells the dispatcher: the handler is done (the slot is free), and the batch is over. */
export interface BatchLifecycle {
  release(batch: RunningBatch): void;
  finish(batch: RunningBatch): void;
}

/** What the dispatcher asks of the runner: run a dispatched batch, and fail one that ran past its time. */
export interface BatchExecutor {
  run(batch: RunningBatch): Promise<void>;
  timeOut(batch: RunningBatch, executionTimeoutMs: number): void;
}

/**
 * Runs a dispatched batch through the handler and settles its items from what comes back: N results for N
 * inputs (an `Error` fails its item; a throw or a wrong-length result fails the batch, or re-runs it by halves
 * with `onBatchError: 'isolate'`), or, for a streaming handler, steps of one slot per input.
 */
export class BatchRunner implements BatchExecutor {
  readonly #handler: AnyHandler;
  readonly #streaming: boolean;
  readonly #onBatchError: OnBatchError;
  readonly #settlement: Settlement;
  readonly #lifecycle: BatchLifecycle;

  constructor(
    handler: AnyHandler,
    streaming: boolean,
    onBatchError: OnBatchError,
    settlement: Settlement,
    lifecycle: BatchLifecycle,
  ) {
    this.#handler = handler;
    this.#streaming = streaming;
    this.#onBatchError = onBatchError;
    this.#settlement = settlement;
    this.#lifecycle = lifecycle;
  }

  async run(batch: RunningBatch): Promise<void> {
    const context = new Context(batch);
    // An item can already be settled here (its `onDispatch` threw); its input must not reach the handler.
    const whole = batch.open === batch.items.length;
    const items = whole ? batch.items : batch.items.filter((item) => item.state === ItemState.Running);
    const inputs = whole ? batch.inputs : inputsOf(items);
    try {
      if (items.length === 0) return;
      if (this.#streaming) await this.#runStream(items, inputs, context, batch);
      else await this.#runItems(items, inputs, context, batch);
    } catch (error) {
      // Defensive: #runItems/#runStream settle every item themselves; this keeps the invariant if they ever throw.
      batch.broken = true;
      for (const item of batch.items) this.#settlement.fail(item, error);
    } finally {
      this.#lifecycle.finish(batch);
    }
  }

  /** Fails every item of a batch that ran past `executionTimeoutMs` and aborts its handler. */
  timeOut(batch: RunningBatch, executionTimeoutMs: number): void {
    batch.timer = undefined;
    batch.broken = true;
    const error = new BatchError(
      ErrorCode.EXECUTION_TIMEOUT,
      `Batch ${batch.id} ran longer than executionTimeoutMs (${executionTimeoutMs} ms)`,
    );
    for (const item of batch.items) this.#settlement.fail(item, error);
    controllerOf(batch).abort(error);
  }

  /**
   * Runs the handler over `items`. `batch` is given for the top-level call only: its slot is released as soon as
   * the handler is done, before the callers' continuations (writing their responses) run, so the next batch is
   * already on its way to the model meanwhile. Isolating sub-calls keep the slot until the last one is done.
   */
  async #runItems(items: Item[], inputs: unknown[], context: BatchContext, batch?: RunningBatch): Promise<void> {
    const settlement = this.#settlement;
    let results: unknown;
    try {
      results = await this.#handler(inputs, context);
    } catch (error) {
      const open = items.filter((item) => item.state === ItemState.Running);
      const running = (items[0] as Item).batch as RunningBatch;
      running.broken = true;
      if (this.#onBatchError === 'isolate' && open.length > 1 && !context.signal.aborted) {
        const middle = Math.ceil(open.length / 2);
        const [first, second] = [open.slice(0, middle), open.slice(middle)];
        await this.#runItems(first, inputsOf(first), context);
        await this.#runItems(second, inputsOf(second), context);
        return;
      }
      if (batch !== undefined) this.#lifecycle.release(batch);
      for (const item of open) settlement.fail(item, error);
      return;
    }
    if (batch !== undefined) this.#lifecycle.release(batch);
    if (!Array.isArray(results) || results.length !== items.length) {
      const error = badResult(items.length, results);
      for (const item of items) settlement.fail(item, error);
      return;
    }
    settlement.results(items, results);
  }

  async #runStream(items: Item[], inputs: unknown[], context: BatchContext, batch: RunningBatch): Promise<void> {
    const settlement = this.#settlement;
    let iterator: AsyncIterator<unknown> | undefined;
    let stoppedEarly = false;
    try {
      const iterable = this.#handler(inputs, context) as AsyncIterable<unknown> | null | undefined;
      if (typeof iterable?.[Symbol.asyncIterator] !== 'function') {
        throw new BatchError(
          ErrorCode.BAD_HANDLER_RESULT,
          `Expected the streaming batch handler to return an async iterable, got ${describe(iterable)}`,
        );
      }
      iterator = iterable[Symbol.asyncIterator]();
      for (;;) {
        const step = await iterator.next();
        if (step.done === true) break;
        const slots: unknown = step.value;
        if (!Array.isArray(slots) || slots.length !== items.length) {
          stoppedEarly = true;
          throw badResult(items.length, slots, 'step');
        }
        for (let index = 0; index < items.length; index += 1) {
          const item = items[index] as Item;
          if (item.state !== ItemState.Running) continue;
          const slot: unknown = slots[index];
          if (slot === SKIP) continue;
          if (slot === END) settlement.succeed(item, undefined);
          else if (slot instanceof Error) settlement.fail(item, slot);
          else item.watch?.sink?.push(slot);
        }
        if (batch.open === 0) {
          stoppedEarly = true;
          // If consumers left, the rest of the stream is not wanted, and its time says nothing of a full run.
          if (batch.abandoned > 0) batch.broken = true;
          break;
        }
      }
      for (const item of items) settlement.succeed(item, undefined);
    } catch (error) {
      batch.broken = true;
      for (const item of items) settlement.fail(item, error);
    } finally {
      if (stoppedEarly) await iterator?.return?.()?.catch(() => undefined);
    }
  }
}

/** The batch's inputs as a packed array (not `new Array(n)`: a holey array slows down every handler that maps it). */
function inputsOf(items: readonly Item[]): unknown[] {
  const inputs: unknown[] = [];
  for (let index = 0; index < items.length; index += 1) inputs.push((items[index] as Item).input);
  return inputs;
}

/**
 * The handler's context. A class with a prototype getter, not an object literal with `get signal()`: a literal
 * accessor gets a fresh hidden class per batch and made the engine four times slower in `pnpm bench:core`.
 */
class Context implements BatchContext {
  readonly #batch: RunningBatch;
  readonly batchId: number;
  readonly key: unknown;

  constructor(batch: RunningBatch) {
    this.#batch = batch;
    this.batchId = batch.id;
    this.key = batch.key;
  }

  /** Created on first use: an AbortController per batch is a measurable share of the per-item overhead. */
  get signal(): AbortSignal {
    return controllerOf(this.#batch).signal;
  }
}

export function controllerOf(batch: RunningBatch): AbortController {
  batch.controller ??= new AbortController();
  return batch.controller;
}

function badResult(expected: number, actual: unknown, what = 'result'): BatchError {
  const got = Array.isArray(actual) ? `an array of ${actual.length}` : describe(actual);
  return new BatchError(
    ErrorCode.BAD_HANDLER_RESULT,
    `Expected the batch handler to return ${what === 'step' ? 'steps, each ' : ''}an array of ${expected} ${
      what === 'step' ? 'slots' : 'results'
    } (one per input), got ${got}`,
  );
}
