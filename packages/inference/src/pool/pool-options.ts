import { checkInteger, checkNumber, checkString, definedEntries } from '@microbatch/core/util';
import type { WorkerPoolOptions } from './pool-types.js';

/** Library defaults of the pool; documented on {@link WorkerPoolOptions}. */
const POOL_DEFAULTS = {
  size: 1,
  executionProvider: 'cpu',
  threads: 1,
  startTimeoutMs: 60_000,
  name: 'inference',
} as const satisfies Required<Omit<WorkerPoolOptions, 'runner' | 'maxQueueSize'>>;

/** How many times its concurrency the pool queues by default (see `WorkerPoolOptions.maxQueueSize`). */
export const QUEUE_PER_CONCURRENCY = 4;

/** The pool's options with defaults applied (`maxQueueSize` is resolved once the concurrency is known). */
export type ResolvedPoolOptions = Required<Omit<WorkerPoolOptions, 'runner' | 'maxQueueSize'>> &
  Pick<WorkerPoolOptions, 'maxQueueSize'>;

/** Applies the defaults and checks every option once, throwing `TypeError` on misuse. */
export function resolvePoolOptions(options: WorkerPoolOptions): ResolvedPoolOptions {
  const resolved = { ...POOL_DEFAULTS, ...definedEntries('options', options) } as ResolvedPoolOptions;
  checkInteger('size', resolved.size, 1);
  checkString('executionProvider', resolved.executionProvider);
  checkInteger('threads', resolved.threads, 1);
  checkNumber('startTimeoutMs', resolved.startTimeoutMs, 0, 2_147_483_647, true);
  checkString('name', resolved.name);
  if (resolved.maxQueueSize !== undefined) checkInteger('maxQueueSize', resolved.maxQueueSize, 1);
  return resolved;
}
