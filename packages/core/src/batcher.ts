import type { AnyHandler } from './batch-execution.js';
import { SIGNAL_LIKE_CALLS } from './batcher-brand.js';
import { BatchEngine } from './engine.js';
import {
  BATCHER_BRAND,
  type BatchHandler,
  type Batcher,
  type BatcherEvents,
  type BatcherOptions,
  type CallOptions,
  type CloseOptions,
  type StreamingBatchHandler,
  type StreamingBatcher,
} from './types.js';
import { isAsyncGeneratorFunction } from './util/async-generator.js';

/** Gives the callable the batcher's properties, all read from (or written to) the engine. */
function expose<B>(engine: BatchEngine, callable: object): B {
  const target = callable as Record<string, unknown>;
  Object.defineProperties(target, {
    [BATCHER_BRAND]: { value: true },
    [SIGNAL_LIKE_CALLS]: { value: true },
    name: { get: () => engine.name, configurable: true },
    streaming: { get: () => engine.streaming },
    maxBatchSize: {
      get: () => engine.maxBatchSize,
      set: (v: number) => {
        engine.maxBatchSize = v;
      },
    },
    batchWaitTimeoutMs: {
      get: () => engine.batchWaitTimeoutMs,
      set: (v: number) => {
        engine.batchWaitTimeoutMs = v;
      },
    },
    maxConcurrentBatches: {
      get: () => engine.maxConcurrentBatches,
      set: (v: number) => {
        engine.maxConcurrentBatches = v;
      },
    },
    queueLength: { get: () => engine.queueLength },
    inFlightBatches: { get: () => engine.inFlightBatches },
    closed: { get: () => engine.closed },
  });
  target.stats = () => engine.stats();
  target.on = <E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void) =>
    engine.on(event, listener);
  target.close = (options?: CloseOptions) => engine.close(options);
  return callable as B;
}

/**
 * Creates a batcher: call it with one input and get one result, while concurrent calls share one handler call.
 * An `async function*` handler makes a streaming batcher (see {@link createStreamingBatcher}).
 *
 * @example
 * ```ts
 * const generate = createBatcher(async (prompts: string[], { signal }) => model(prompts, { signal }), {
 *   maxBatchSize: 8,
 *   maxLatencyMs: 2_000, // refuse (503 OVERLOADED) what the estimate says cannot be answered in 2 s
 * });
 * const text = await generate('Once upon a time');
 * await generate.call('Hi', { signal, timeoutMs: 200, priority: 1 });
 * ```
 */
export function createBatcher<I, O>(
  handler: StreamingBatchHandler<I, O>,
  options?: BatcherOptions<I>,
): StreamingBatcher<I, O>;
export function createBatcher<I, O>(handler: BatchHandler<I, O>, options?: BatcherOptions<I>): Batcher<I, O>;
export function createBatcher<I, O>(
  handler: BatchHandler<I, O> | StreamingBatchHandler<I, O>,
  options?: BatcherOptions<I>,
): Batcher<I, O> | StreamingBatcher<I, O>;
export function createBatcher<I, O>(
  handler: BatchHandler<I, O> | StreamingBatchHandler<I, O>,
  options?: BatcherOptions<I>,
): Batcher<I, O> | StreamingBatcher<I, O> {
  if (isAsyncGeneratorFunction(handler)) return createStreamingBatcher(handler as StreamingBatchHandler<I, O>, options);
  const engine = new BatchEngine(handler as AnyHandler, false, options as BatcherOptions<unknown>);
  const call = (input: I, callOptions?: CallOptions) => engine.call(input, callOptions) as Promise<O>;
  const batcher = expose<Batcher<I, O>>(engine, call);
  (batcher as { call: unknown }).call = call;
  (batcher as { callAll: unknown }).callAll = (inputs: readonly I[], callOptions?: CallOptions) =>
    engine.callAll(inputs, callOptions) as Promise<O[]>;
  return batcher;
}

/**
 * Creates a streaming batcher: the handler yields steps (one slot per input) and each caller iterates its own
 * values. Use it for handlers that return an async iterable without being an `async function*`.
 *
 * @example
 * ```ts
 * const tokens = createStreamingBatcher(async function* (prompts: string[]) {
 *   for (let step = 0; step < 3; step += 1) yield prompts.map((p) => `${p}#${step}`);
 * });
 * for await (const token of tokens.stream('Once')) console.log(token);
 * ```
 */
export function createStreamingBatcher<I, O>(
  handler: StreamingBatchHandler<I, O>,
  options?: BatcherOptions<I>,
): StreamingBatcher<I, O> {
  const engine = new BatchEngine(handler as AnyHandler, true, options as BatcherOptions<unknown>);
  const call = (input: I, callOptions?: CallOptions): Promise<O[]> =>
    collect(engine.stream(input, callOptions) as AsyncIterableIterator<O>);
  const batcher = expose<StreamingBatcher<I, O>>(engine, call);
  (batcher as { call: unknown }).call = call;
  (batcher as { stream: unknown }).stream = (input: I, callOptions?: CallOptions) =>
    engine.stream(input, callOptions) as AsyncIterableIterator<O>;
  (batcher as { streamAll: unknown }).streamAll = (inputs: readonly I[], callOptions?: CallOptions) =>
    engine.streamAll(inputs, callOptions) as Array<AsyncIterableIterator<O>>;
  (batcher as { callAll: unknown }).callAll = (inputs: readonly I[], callOptions?: CallOptions) =>
    Promise.all(engine.streamAll(inputs, callOptions).map((stream) => collect(stream as AsyncIterableIterator<O>)));
  return batcher;
}

async function collect<O>(stream: AsyncIterableIterator<O>): Promise<O[]> {
  const values: O[] = [];
  for await (const value of stream) values.push(value);
  return values;
}
