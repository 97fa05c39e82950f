// Grammar masks under request scheduling: transformers.js' `generate()` runs the whole batch and samples itself, so
// each row's grammar is a logits processor's work. Before each step it advances every structured row's matcher by
// the token the row sampled last, then sets the logits its grammar does not allow to -Infinity (ahead of top-p,
// which runs after it). Free rows of the same batch are left alone; a row whose grammar is complete, or that ended,
// is no longer masked (the batch may run past it).
import { LogitsProcessor } from '@huggingface/transformers';
import type { Tensor } from '@huggingface/transformers';
import { applyTokenMask } from '../grammar/grammar-engine.js';
import type { TokenMatcher } from '../grammar/grammar-engine.js';
import type { GenerationRow } from './generation-row.js';

/** The message of a row whose grammar reached a dead end (the row then fails with it). */
export const GRAMMAR_DEAD_END = "the grammar reached a state the model's vocabulary cannot continue";

/** Masks the structured rows of one `generate()` call; `failed` lists the rows whose grammar had no way on. */
export class GrammarLogitsProcessor extends LogitsProcessor {
  readonly #matchers: readonly (TokenMatcher | undefined)[];
  readonly #rows: readonly GenerationRow[];
  readonly #mask: Int32Array;
  #steps = 0;
  readonly failed = new Set<number>();

  constructor(matchers: readonly (TokenMatcher | undefined)[], rows: readonly GenerationRow[], vocabSize: number) {
    super();
    this.#matchers = matchers;
    this.#rows = rows;
    this.#mask = new Int32Array(Math.ceil(vocabSize / 32));
  }

  override _call(inputIds: bigint[][], logits: Tensor): Tensor {
    const data = logits.data as Float32Array;
    const vocab = logits.dims.at(-1) ?? data.length;
    this.#matchers.forEach((matcher, row) => {
      if (matcher === undefined || this.failed.has(row) || (this.#rows[row] as GenerationRow).finished) return;
      try {
        if (this.#steps > 0 && !matcher.acceptToken(Number(inputIds[row]?.at(-1)))) {
          this.failed.add(row);
          return;
        }
        if (matcher.isTerminated()) return;
        matcher.fillNextTokenBitmask(this.#mask);
        if (applyTokenMask(data.subarray(row * vocab, (row + 1) * vocab), this.#mask) === 0) this.failed.add(row);
      } catch {
        // The matcher's WebAssembly instance failed: this row cannot go on.
        this.failed.add(row);
      }
    });
    this.#steps += 1;
    return logits;
  }
}
