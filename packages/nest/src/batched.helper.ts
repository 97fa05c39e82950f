import type {
  BatchContext,
  BatchHandler,
  CallOptions,
  StreamingBatchHandler,
  StreamingBatcher,
} from '@microbatch/core';
import { type BatchedOptions, OPTIONS_SCOPES, checkOptions, describe } from './batch.options.js';
import { isAsyncGeneratorFunction } from '@microbatch/core/util';
import { addFieldTarget, boundBatcher } from './batch.target.js';
import type { AnyBatcher, BatchTarget } from './batch.types.js';

type Handler<I> = (inputs: I[], context: BatchContext) => unknown;

/**
 * A batched method of a provider, as its callers see it: ONE input in, ONE result out, while concurrent calls
 * share one handler call (Ray Serve's "query through a handle").
 *
 * @example
 * ```ts
 * const vector: number[] = await this.embedder.embed('hello', { signal });
 * ```
 */
export interface BatchedMethod<I, O> {
  (input: I, options?: CallOptions): Promise<O>;
}

/**
 * A streaming batched method of a provider: `stream()` gives the caller its own values as they are produced;
 * calling it collects them into an array.
 *
 * @example
 * ```ts
 * for await (const token of this.generator.tokens.stream('Once upon a time')) write(token);
 * ```
 */
export interface StreamingBatchedMethod<I, O> {
  (input: I, options?: CallOptions): Promise<O[]>;
  stream(input: I, options?: CallOptions): AsyncIterableIterator<O>;
}

/**
 * Declares a batched method on an `@Injectable()` as a field: the handler takes N inputs and returns N results
 * (an `async function*` yields steps, one slot per input), and the field is typed for callers with one input and
 * one result, so no cast is needed anywhere. `BatchModule` binds it when the application initializes, with the
 * options layered like `@Batch()`'s, and drains it on shutdown.
 *
 * @example
 * ```ts
 * @Injectable()
 * export class Embedder {
 *   readonly embed = batched(this, async (texts: string[], { signal }) => this.model.embed(texts, { signal }), {
 *     maxBatchSize: 32,
 *   });
 *   constructor(private readonly model: EmbeddingModel) {}
 * }
 * ```
 */
export function batched<I, O>(
  owner: object,
  handler: StreamingBatchHandler<I, O>,
  options?: BatchedOptions<I>,
): StreamingBatchedMethod<I, O>;
export function batched<I, O>(
  owner: object,
  handler: BatchHandler<I, O>,
  options?: BatchedOptions<I>,
): BatchedMethod<I, O>;
export function batched<I, O>(
  owner: object,
  handler: BatchHandler<I, O> | StreamingBatchHandler<I, O>,
  options?: BatchedOptions<I>,
): BatchedMethod<I, O> | StreamingBatchedMethod<I, O> {
  const label = 'batched()';
  if (typeof owner !== 'object' || owner === null) {
    throw new TypeError(`${label}: Expected the owner (\`this\`) to be an object, got ${describe(owner)}`);
  }
  const className = owner.constructor.name;
  if (typeof handler !== 'function') {
    throw new TypeError(`${label}: Expected the handler to be a function, got ${describe(handler)} (in ${className})`);
  }
  const own = checkOptions(label, options, OPTIONS_SCOPES.batched, className);
  const target: BatchTarget = {
    key: undefined,
    streaming: isAsyncGeneratorFunction(handler),
    options: own,
    // Called on the owner, so a `function` handler may use `this` like a method would.
    run: (_instance, inputs, context) => (handler as Handler<I>).call(owner, inputs as I[], context),
  };
  const batcher = (): AnyBatcher => {
    const bound = boundBatcher(owner, target);
    if (bound !== undefined) return bound;
    const name = `${className}.${String(target.key ?? 'batched method')}`;
    throw new TypeError(
      `${label}: ${name} has no batcher yet: BatchModule binds it when the application initializes. ` +
        `Import BatchModule.forRoot(), let Nest create ${className} (default scope) and call it from onModuleInit() on`,
    );
  };
  const method = (input: I, callOptions?: CallOptions): Promise<unknown> => batcher().call(input, callOptions);
  if (target.streaming) {
    (method as { stream?: unknown }).stream = (input: I, callOptions?: CallOptions) =>
      (batcher() as StreamingBatcher<unknown, O>).stream(input, callOptions);
  }
  target.handle = method;
  addFieldTarget(owner, target);
  return method as BatchedMethod<I, O> | StreamingBatchedMethod<I, O>;
}
