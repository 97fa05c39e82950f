// FOR TESTS ONLY, and deliberately not exported from the package entry: a pool whose workers misbehave on
// marked inputs, so crash, uncaught-exception and hang handling can be tested against real worker threads.
import type { TestHooks } from './contract/messages.js';
import type { WorkerPool, WorkerPoolOptions } from './pool/pool-types.js';
import type { ChunkOf, InputOf, OutputOf } from './contract/task-types.js';
import type { RunnerSpec } from './contract/runner-specs.js';
import { InferenceWorkerPool } from './pool/worker-pool.js';

export type { TestHooks } from './contract/messages.js';

/**
 * Test-only: like `createWorkerPool`, but the workers exit, throw or hang when an input's JSON contains a marker.
 *
 * @example
 * ```ts
 * const pool = createWorkerPoolForTesting({ runner }, { exitOn: '__exit__' });
 * ```
 */
export function createWorkerPoolForTesting<S extends RunnerSpec>(
  options: WorkerPoolOptions<S>,
  hooks: TestHooks,
): WorkerPool<InputOf<S>, OutputOf<S>, ChunkOf<S>> {
  return new InferenceWorkerPool<InputOf<S>, OutputOf<S>, ChunkOf<S>>(options, hooks);
}
