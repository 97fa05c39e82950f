// A generation in the decode loop: its prompt, where its KV cache is, the token it feeds next, and its output row.
import type { GenerationRow } from '../generation-row.js';
import type { KvRow, KvSource } from './padded-batch.js';
import type { SamplingParams } from './sampler.js';

/** One generation in the loop. */
export class Sequence implements KvRow {
  source: KvSource | undefined = undefined;
  row = 0;
  /** Tokens in this sequence's KV cache (prompt tokens prefilled, then one per decode step). */
  length = 0;
  /** The token to feed at the next decode step (the last one sampled). */
  next = -1;
  /** Prompt tokens already prefilled, for prompts prefilled in chunks. */
  prefilled = 0;
  /** Prompt tokens whose KV came from the prefix cache. */
  cachedTokens = 0;
  cancelled = false;
  /** Why the loop ended this row with an error (its grammar reached a dead end); it is answered as that error. */
  failure: string | undefined = undefined;
  /** The loop step (iteration) in which it last got a token, so a step counts each sequence once. */
  lastStep = -1;
  /** The most sequences that got a token in one step together with it (itself included), and the first such step. */
  batchRows = 0;
  batchStep = -1;

  constructor(
    readonly prompt: readonly number[],
    readonly output: GenerationRow,
    readonly sampling: SamplingParams,
    readonly isCancelled: () => boolean,
    /** The prefix cache's partition: only blocks cached under the same salt are reused (see `PrefixCache`). */
    readonly cacheSalt = '',
  ) {}

  get done(): boolean {
    return this.cancelled || this.output.finished;
  }
}
