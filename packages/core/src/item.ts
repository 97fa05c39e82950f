import type { ItemStream } from './item-stream.js';
import type { BatchSpan } from './tracing.js';
import type { DispatchInfo } from './types.js';

/** Where an item is in its life: waiting, in a running batch, or done (settled exactly once). */
export const ItemState = { Queued: 0, Running: 1, Settled: 2 } as const;
export type ItemState = (typeof ItemState)[keyof typeof ItemState];

/**
 * One call's bookkeeping from enqueue until it settles. A class, not object literals: every item shares one
 * hidden class whatever the call's options, which keeps the hot paths monomorphic.
 */
export class Item {
  readonly input: unknown;
  key: unknown = undefined;
  cost = 1;
  /** The call's `fairnessKey` (`undefined`: the anonymous key). */
  fairnessKey: unknown = undefined;
  readonly priority: number;
  readonly seq: number;
  /** The tick the call was made in: shared by the calls of one burst, and it holds their arrival time. */
  readonly tick: Tick;
  /**
   * When the item must have its result: its deadline or its arrival + `maxLatencyMs`, whichever comes first
   * (`undefined` without either, not `Infinity`: a number field costs every item a heap box). Queued items the
   * estimate predicts past it are refused early.
   */
  deadlineAt: number | undefined = undefined;
  /** Whether `deadlineAt` comes from `maxLatencyMs` rather than from the deadline. */
  latencyBound = false;
  state: ItemState = ItemState.Queued;
  readonly resolve: ((value: unknown) => void) | undefined;
  readonly reject: ((error: unknown) => void) | undefined;
  batch: RunningBatch | undefined = undefined;
  /** What the batcher's `tracer` captured of the caller (its trace context); only with a `tracer`. */
  trace: unknown = undefined;
  /** What only some calls have (a stream, a signal, a deadline timer, `onDispatch`): kept apart so plain calls stay small. */
  watch: Watch | undefined = undefined;

  constructor(
    input: unknown,
    priority: number,
    seq: number,
    tick: Tick,
    resolve: ((value: unknown) => void) | undefined,
    reject: ((error: unknown) => void) | undefined,
  ) {
    this.input = input;
    this.priority = priority;
    this.seq = seq;
    this.tick = tick;
    this.resolve = resolve;
    this.reject = reject;
  }

  /** When the call was made (its tick's clock reading). */
  get enqueuedAt(): number {
    return this.tick.now;
  }
}

/**
 * The clock reading of one synchronous burst of calls. Items point to it rather than hold the number: a number
 * field that is not a small integer is a heap box of its own in V8, one more allocation per call.
 */
export class Tick {
  readonly now: number;

  constructor(now: number) {
    this.now = now;
  }
}

/** The parts of an item that only calls with a stream, a signal, a deadline or `onDispatch` have. */
export class Watch {
  readonly sink: ItemStream<unknown> | undefined;
  readonly signal: AbortSignal | undefined;
  readonly onDispatch: ((info: DispatchInfo) => void) | undefined;
  onAbort: (() => void) | undefined = undefined;
  timer: unknown = undefined;

  constructor(
    sink: ItemStream<unknown> | undefined,
    signal: AbortSignal | undefined,
    onDispatch: ((info: DispatchInfo) => void) | undefined,
  ) {
    this.sink = sink;
    this.signal = signal;
    this.onDispatch = onDispatch;
  }
}

/** A dispatched batch, from its handler call until it finishes or times out. */
export class RunningBatch {
  readonly id: number;
  readonly key: unknown;
  readonly items: Item[];
  /** The items' inputs, gathered while they were dispatched (one loop over the batch less). */
  readonly inputs: unknown[];
  /** The batch's total cost, the x of the latency estimate. */
  readonly cost: number;
  readonly startedAt: number;
  /** Created on first use (see `controllerOf`). */
  controller: AbortController | undefined = undefined;
  /** Items not yet settled; when it reaches 0 early, the handler's signal aborts. */
  open: number;
  /** Items that failed in the handler (for the `batchEnd` event). */
  failed = 0;
  /** Items whose caller left (cancelled or timed out) while it ran. */
  abandoned = 0;
  timer: unknown = undefined;
  /** When the handler was done (or timed out): the slot is free from then on. */
  endedAt: number | undefined = undefined;
  /** Whether the handler failed as a whole or timed out: then its duration says nothing about the model. */
  broken = false;
  finished = false;
  /** The batch's span, with a `tracer`. */
  span: BatchSpan | undefined = undefined;

  constructor(id: number, key: unknown, items: Item[], inputs: unknown[], cost: number, startedAt: number) {
    this.id = id;
    this.key = key;
    this.items = items;
    this.inputs = inputs;
    this.cost = cost;
    this.startedAt = startedAt;
    this.open = items.length;
  }
}
