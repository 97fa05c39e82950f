import { validateBatcherOptions } from '@microbatch/core';
import { describeValue as describe, dropUndefined } from '@microbatch/core/util';
import { checkServerErrorListener } from '@microbatch/core/http';
import type { BatcherOptions } from '@microbatch/core';
import type { ServerErrorListener } from '@microbatch/core/http';
import type { Type } from '@nestjs/common';

/**
 * Defaults for every batcher of the application, between the library defaults and `@Batch()`.
 *
 * @example
 * ```ts
 * BatchModule.forRoot({ batchWaitTimeoutMs: 5, maxQueueSize: 256 } satisfies BatchModuleOptions);
 * ```
 */
export interface BatchModuleOptions extends Omit<BatcherOptions<never>, 'name' | 'batchKey' | 'cost'> {
  /**
   * Told once about each error a batched route answers with 500 (a handler that threw or returned a bad result);
   * never about 4xx, 503 or 504 answers, nor about a route's own `HttpException`s. The client only ever sees a
   * generic message. Module-level only: it is the application's error channel, as in the Express and Koa adapters.
   * @default (error) => new Logger('BatchInterceptor').error(error)
   */
  readonly onError?: ServerErrorListener;
}

/**
 * Options of `@Batch()`: every core batcher option, for the batcher of each request's arguments (`batchKey` and
 * `cost` receive them as an array, one entry per parameter), plus `paramTypes`.
 *
 * @example
 * ```ts
 * @Batch({ maxBatchSize: 4, batchKey: ([body]: [GenerateDto]) => body.model, paramTypes: [GenerateDto] })
 * ```
 */
// `any[]` by default so that `batchKey: ([body]) => body.model` needs no annotation.
export interface BatchOptions<Args extends readonly unknown[] = any[]> extends BatcherOptions<Args> {
  /**
   * A name for logs, metrics and error messages. Method-level only.
   * @default 'ClassName.methodName'
   */
  readonly name?: string;
  /**
   * What ONE request brings for each parameter, by position, for pipes such as `ValidationPipe`: TypeScript
   * records a parameter declared `bodies: GenerateDto[]` only as `Array`, which no pipe validates. Method-level only.
   * @default the types TypeScript recorded
   */
  readonly paramTypes?: readonly (Type | undefined)[];
}

/**
 * Options of `batched()`: every core batcher option.
 *
 * @example
 * ```ts
 * const options: BatchedOptions<string> = { maxBatchSize: 32, cost: (text) => text.length };
 * readonly embed = batched(this, (texts: string[]) => model.embed(texts), options);
 * ```
 */
export interface BatchedOptions<I> extends BatcherOptions<I> {
  /**
   * A name for logs, metrics and error messages.
   * @default 'ClassName.propertyName'
   */
  readonly name?: string;
}

// A record rather than a list so that the compiler fails here when core adds or renames an option.
const CORE_OPTION_KEYS = {
  name: true,
  maxBatchSize: true,
  batchWaitTimeoutMs: true,
  maxLatencyMs: true,
  maxConcurrentBatches: true,
  maxQueueSize: true,
  timeoutMs: true,
  executionTimeoutMs: true,
  batchKey: true,
  cost: true,
  maxBatchCost: true,
  onBatchError: true,
  retryAfterSeconds: true,
  clock: true,
  tracer: true,
} as const satisfies Record<keyof BatcherOptions<unknown>, true>;

/** Which options a place accepts, and where to go for one it does not. */
export interface OptionsScope {
  readonly keys: readonly string[];
  readonly elsewhere: string;
}

const ALL_KEYS = Object.keys(CORE_OPTION_KEYS);

/** The options each place accepts. */
export const OPTIONS_SCOPES = {
  module: {
    keys: [...ALL_KEYS.filter((key) => !['name', 'batchKey', 'cost'].includes(key)), 'onError'],
    elsewhere: '@Batch() or batched()',
  },
  classLevel: { keys: ALL_KEYS.filter((key) => key !== 'name'), elsewhere: 'a method-level @Batch()' },
  method: { keys: [...ALL_KEYS, 'paramTypes'], elsewhere: '' },
  batched: { keys: ALL_KEYS, elsewhere: 'a method-level @Batch() of a route' },
} as const satisfies Record<string, OptionsScope>;

export { describe };

/**
 * Checks options where they are written, so that misuse fails at startup with the name of the decorator or method
 * (`label`) rather than on the first request. Value checks are core's (`validateBatcherOptions`).
 */
export function checkOptions<T extends object>(
  label: string,
  options: T | undefined,
  scope: OptionsScope,
  where?: string,
): T {
  const fail = (problem: string, cause?: unknown): never => {
    const message = `${label}: ${problem}${where === undefined ? '' : ` (in ${where})`}`;
    throw new TypeError(message, cause === undefined ? undefined : { cause });
  };
  if (options === undefined) return {} as T;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    fail(`Expected options to be an object, got ${describe(options)}`);
  }
  const { paramTypes, onError, ...core } = options as BatchOptions & BatchModuleOptions;
  for (const key of Object.keys(options)) {
    if (scope.keys.includes(key)) continue;
    if (key === 'onError') fail('Option `onError` is not accepted here; set it on BatchModule.forRoot()');
    if (key in CORE_OPTION_KEYS || key === 'paramTypes') {
      fail(`Option \`${key}\` is not accepted here; set it on ${scope.elsewhere}`);
    }
    fail(`Unknown option \`${key}\``);
  }
  if (paramTypes !== undefined && (!Array.isArray(paramTypes) || paramTypes.some((type) => !isTypeOrHole(type)))) {
    fail(`Expected \`paramTypes\` to be an array of classes, got ${describe(paramTypes)}`);
  }
  try {
    checkServerErrorListener('BatchModule', onError);
    validateBatcherOptions(core);
  } catch (error) {
    if (error instanceof TypeError) fail(error.message, error);
    throw error;
  }
  return options;
}

function isTypeOrHole(value: unknown): boolean {
  return value === undefined || typeof value === 'function';
}

/**
 * Layers options: later layers win, and an option set to `undefined` leaves the one below in place.
 *
 * @example
 * ```ts
 * mergeOptions({ maxBatchSize: 8 }, { maxBatchSize: undefined, timeoutMs: 50 }); // { maxBatchSize: 8, timeoutMs: 50 }
 * ```
 */
export function mergeOptions<T extends object>(...layers: ReadonlyArray<Partial<T> | undefined>): Partial<T> {
  return Object.assign({}, ...layers.map((layer) => dropUndefined(layer ?? {}))) as Partial<T>;
}
