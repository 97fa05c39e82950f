// A runner's grammars: the engine of its model's vocabulary, loaded at the first request with a grammar (a worker
// that never sees one never loads the WebAssembly), and the matcher of each such request. Both schedulings use it.
import { InputError } from '../contract/errors.js';
import type { GrammarSpec } from '../contract/text-generation-types.js';
import { GrammarEngine } from './grammar-engine.js';
import type { TokenMatcher } from './grammar-engine.js';
import { readVocabulary } from './vocabulary.js';

/**
 * The grammar side of one runner (one model, one worker thread).
 *
 * @example
 * ```ts
 * const grammars = new RunnerGrammars(spec.model, 50257, [50256]);
 * const matcher = await grammars.matcher({ type: 'choice', choices: ['yes', 'no'] }, undefined);
 * ```
 */
export class RunnerGrammars {
  readonly #model: string;
  readonly #vocabSize: number;
  readonly #stopTokenIds: readonly number[];
  #engine: Promise<GrammarEngine> | undefined;

  constructor(model: string, vocabSize: number, stopTokenIds: readonly number[]) {
    this.#model = model;
    this.#vocabSize = vocabSize;
    this.#stopTokenIds = stopTokenIds;
  }

  /** A matcher for `grammar`, with the tokens of a resumed stream (`resume`) already accepted. */
  async matcher(grammar: GrammarSpec, resume: readonly number[] | undefined): Promise<TokenMatcher> {
    this.#engine ??= GrammarEngine.create({
      vocabulary: readVocabulary(this.#model),
      vocabSize: this.#vocabSize,
      stopTokenIds: this.#stopTokenIds,
    });
    const engine = await this.#engine.catch((error: unknown) => {
      this.#engine = undefined;
      throw error;
    });
    const matcher = await engine.matcher(grammar);
    for (const id of resume ?? []) {
      if (!matcher.acceptToken(id)) {
        matcher.dispose();
        throw new InputError('resume_tokens', "`resume_tokens` do not follow the request's grammar");
      }
    }
    return matcher;
  }
}
