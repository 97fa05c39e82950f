// The types a batched target is known by. The targets (`batch.target.ts`) claim request scopes from
// `batch.storage.ts`, and a scope names its target by this type: kept here, the two files import in one direction.
import type { BatchContext, Batcher, StreamingBatcher } from '@microbatch/core';

/** A batcher of either kind, as bound to one instance. */
export type AnyBatcher = Batcher<unknown, unknown> | StreamingBatcher<unknown, unknown>;

/** A batched method (`@Batch()`) or field (`batched()`): what runs once per batch, and its own options. */
export interface BatchTarget {
  /** The method or property name; a field's is found when it is bound. */
  key: string | symbol | undefined;
  readonly streaming: boolean;
  /** The target's own layer of options (method-level `@Batch()` or `batched()`). */
  readonly options: object;
  /** The callable of a `batched()` field, by which its property is found; `undefined` for a route. */
  handle?: unknown;
  /** Runs one batch on `instance`. */
  run(instance: object, inputs: unknown[], context: BatchContext): unknown;
}
