import { createBatcher } from '../batcher.js';
import { isBatcher } from '../batcher-brand.js';
import { BatchError, ErrorCode, isBatchError } from '../errors.js';
import type {
  BatchHandler,
  Batcher,
  BatcherOptions,
  CallOptions,
  StreamingBatchHandler,
  StreamingBatcher,
} from '../types.js';
import { checkOptionalFunction } from '../util/checks.js';
import { describeValue as describe } from '../util/describe-value.js';
import { type HttpErrorCode, toBatchError } from './error-mapping.js';

/**
 * The per-request call options a route may set from the request.
 *
 * @example
 * ```ts
 * batchRoute({ handler, callOptions: (req) => ({ priority: req.get('x-tier') === 'pro' ? 1 : 0, fairnessKey: req.ip }) });
 * ```
 */
export type RequestCallOptions = Pick<CallOptions, 'priority' | 'timeoutMs' | 'maxLatencyMs' | 'fairnessKey'>;

/**
 * What a route batches with, as the run-time check reads it: its own handler (and batcher options), or an existing
 * batcher. Adapters type their options with the strict {@link BatchRouteOptions}.
 *
 * @example
 * ```ts
 * batchRoute({ handler: async (prompts: string[]) => model(prompts), maxBatchSize: 8 }); // its own batcher
 * batchRoute({ batcher: sharedBatcher }); // a batcher shared with other routes
 * ```
 */
export interface RouteBatcherOptions<I, O> extends BatcherOptions<I> {
  /**
   * The batch handler; the route creates its batcher from it and the other batcher options. An `async function*`
   * streams (Server-Sent Events). Give exactly one of `handler` and `batcher`.
   */
  readonly handler?: BatchHandler<I, O> | StreamingBatchHandler<I, O>;
  /** An existing batcher, for example one shared by several routes. Give exactly one of `handler` and `batcher`. */
  readonly batcher?: Batcher<I, O> | StreamingBatcher<I, O>;
}

/**
 * The options every framework's `batchRoute` takes, checked by the compiler: the adapter's own hooks `H` (`input`,
 * `output`, `callOptions`, `onError`), plus either `handler` with any core batcher option (the route creates its
 * batcher) or `batcher` alone (an existing one, configured when it was created). Giving neither, both, or batcher
 * options beside `batcher` does not type-check; {@link batcherForRoute} throws the same misuse as a `TypeError` at
 * run time, for callers the compiler did not see. {@link RouteBatcherOptions} is the loose shape that run-time check
 * reads.
 *
 * @example
 * ```ts
 * type ExpressRouteOptions<I, O> = BatchRouteOptions<I, O, { readonly input?: (req: Request) => I }>;
 * const options: ExpressRouteOptions<string, string> = { input: (req) => String(req.body.prompt), handler: generate };
 * ```
 */
export type BatchRouteOptions<I, O, H extends object = RouteHooks> = H &
  (HandlerRoute<I, O> | SharedBatcherRoute<I, O>);

/** A route with its own batcher: `handler` and any core batcher option, never `batcher`. */
type HandlerRoute<I, O> = BatcherOptions<I> & {
  /** The batch handler; an `async function*` streams (Server-Sent Events). */
  readonly handler: BatchHandler<I, O> | StreamingBatchHandler<I, O>;
  readonly batcher?: never;
};

/** A route on an existing batcher: `batcher` alone, since its options were fixed when it was created. */
type SharedBatcherRoute<I, O> = { readonly [K in keyof BatcherOptions<I>]?: never } & {
  /** An existing batcher, for example one shared by several routes. */
  readonly batcher: Batcher<I, O> | StreamingBatcher<I, O>;
  readonly handler?: never;
};

/**
 * The batcher a route uses: `batcher` as given, or one created from `handler` and `batcherOptions` (which core
 * validates). `batcherOptions` must hold the options left after the adapter took its own.
 *
 * @example
 * ```ts
 * const { input, output, handler, batcher, ...batcherOptions } = options;
 * const routeBatcherInstance = routeBatcher('batchRoute', { handler, batcher }, batcherOptions);
 * ```
 */
export function routeBatcher<I, O>(
  caller: string,
  options: RouteBatcherOptions<I, O>,
  batcherOptions: BatcherOptions<I>,
): Batcher<I, O> | StreamingBatcher<I, O> {
  const { handler, batcher } = options;
  if ((handler === undefined) === (batcher === undefined)) {
    throw new TypeError(
      `\`${caller}\` needs exactly one of \`handler\` and \`batcher\`, got ${handler === undefined ? 'neither' : 'both'}`,
    );
  }
  if (handler !== undefined) return createBatcher(handler, batcherOptions);
  if (!isBatcher(batcher)) {
    throw new TypeError(`Expected \`batcher\` to be a batcher from \`createBatcher()\`, got ${describe(batcher)}`);
  }
  // Options next to `batcher` would be silently ignored: the batcher was configured when it was created.
  const ignored = Object.keys(batcherOptions).filter(
    (key) => batcherOptions[key as keyof BatcherOptions<I>] !== undefined,
  );
  if (ignored.length > 0) {
    throw new TypeError(
      `\`${caller}\` got \`batcher\` together with batcher options (${ignored.map((key) => `\`${key}\``).join(', ')}); ` +
        'pass them to `createBatcher()` instead',
    );
  }
  return batcher;
}

/** What every framework's `batchRoute` takes besides the batcher options: how to read, send and prioritise. */
export interface RouteHooks {
  readonly input?: unknown;
  readonly output?: unknown;
  readonly callOptions?: unknown;
}

/**
 * Checks a `batchRoute`'s options once, at setup, and returns its batcher: the options are an object, `input`,
 * `output` and `callOptions` are functions when given, exactly one of `handler`/`batcher` is there, and a streaming
 * batcher has no `output` (each value is one Server-Sent Event).
 *
 * @example
 * ```ts
 * const batcher = batcherForRoute<I, O>('batchRoute', options);
 * const { input = (req) => req.body, output, callOptions } = options;
 * ```
 */
export function batcherForRoute<I, O>(
  caller: string,
  options: RouteBatcherOptions<I, O> & RouteHooks,
): Batcher<I, O> | StreamingBatcher<I, O> {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`${caller}\` options to be an object, got ${describe(options)}`);
  }
  const { input, output, callOptions, handler, batcher: given, ...rest } = options;
  checkOptionalFunction('input', input);
  checkOptionalFunction('output', output);
  checkOptionalFunction('callOptions', callOptions);
  const batcher = routeBatcher<I, O>(caller, { handler, batcher: given }, rest);
  if (batcher.streaming && output !== undefined) {
    throw new TypeError(
      `\`${caller}\` got \`output\` for a streaming batcher: each streamed value is sent as one Server-Sent Event`,
    );
  }
  return batcher;
}

/**
 * The error a route answers when turning the request into an input failed: a `BatchError` or an `http-errors`
 * style error keeps its meaning; anything else is a validation failure (400) whose message is shown.
 *
 * @example
 * ```ts
 * toInputError(new Error('`prompt` must be a string')).code; // 'INVALID_INPUT'
 * ```
 */
export function toInputError(error: unknown): BatchError<HttpErrorCode> {
  if (isBatchError(error) || hasStatus(error)) return toBatchError(error);
  const message = error instanceof Error && error.message !== '' ? error.message : 'Invalid input';
  return new BatchError<HttpErrorCode>(ErrorCode.INVALID_INPUT, message, { cause: error });
}

function hasStatus(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  return typeof status === 'number' || typeof statusCode === 'number';
}
