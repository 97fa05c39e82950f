import type { FinishReason, TextGenerationChunk, TextGenerationOutput, TokenUsage } from '../runner-types.js';

/** What one row of a batched generation needs to know to decide when it is done. */
export interface GenerationRowOptions {
  readonly promptTokens: number;
  readonly maxNewTokens: number;
  readonly stop: readonly string[];
  readonly eosTokenIds: ReadonlySet<number>;
  /** Decodes generated ids to text (special tokens skipped). */
  readonly decode: (ids: readonly number[]) => string;
}

/**
 * One request's view of a batched generation. The batch keeps generating until every row is done, so each row
 * records its own end (EOS, stop string, its own `max_new_tokens`) and ignores the tokens that follow.
 *
 * Text is always the decode of ALL generated ids, cut at the first stop string: decoding the cumulative ids and
 * emitting the difference keeps multi-token characters and the tokenizer's space handling right, and the streamed
 * pieces add up to the same text as the non-streamed result because both come from this one class.
 */
export class GenerationRow {
  readonly #options: GenerationRowOptions;
  readonly #ids: number[] = [];
  #text = '';
  #finish: FinishReason | null = null;
  #emitted = 0;
  #reported = false;

  constructor(options: GenerationRowOptions) {
    this.#options = options;
  }

  get finished(): boolean {
    return this.#finish !== null;
  }

  /** Adds the token generated for this row in the latest step. */
  push(id: number): void {
    if (this.#finish !== null) return;
    this.#ids.push(id);
    if (this.#options.eosTokenIds.has(id)) {
      this.#finish = 'stop';
      return;
    }
    const text = this.#options.decode(this.#ids);
    const stopAt = firstStop(text, this.#options.stop);
    if (stopAt >= 0) {
      this.#text = text.slice(0, stopAt);
      this.#finish = 'stop';
      return;
    }
    this.#text = text;
    if (this.#ids.length >= this.#options.maxNewTokens) this.#finish = 'length';
  }

  /** Ends a row the model stopped early for a reason of its own (a global length limit). */
  forceFinish(): void {
    this.#finish ??= 'length';
  }

  /**
   * The streamed slot for the latest step: the new settled text, the final chunk when the row just finished, or
   * `null` when there is nothing to send (nothing new yet, or the final chunk already went out).
   */
  takeChunk(): TextGenerationChunk | null {
    if (this.#reported) return null;
    const end = this.#finish === null ? this.#settledEnd() : this.#text.length;
    const piece = end > this.#emitted ? this.#text.slice(this.#emitted, end) : '';
    this.#emitted = Math.max(this.#emitted, end);
    if (this.#finish !== null) {
      this.#reported = true;
      return { text: piece, finish_reason: this.#finish, usage: this.#usage() };
    }
    return piece.length > 0 ? { text: piece, finish_reason: null, usage: null } : null;
  }

  /** The row's final result. */
  output(): TextGenerationOutput {
    return { text: this.#text, finish_reason: this.#finish ?? 'length', usage: this.#usage() };
  }

  #usage(): TokenUsage {
    const { promptTokens } = this.#options;
    return { prompt_tokens: promptTokens, completion_tokens: this.#ids.length, total_tokens: promptTokens + this.#ids.length };
  }

  /**
   * How much of the current text cannot change any more: it holds back a trailing replacement character (an
   * unfinished multi-byte character) and any tail that could still grow into a stop string.
   */
  #settledEnd(): number {
    const text = this.#text;
    let end = text.length;
    while (end > 0 && text.charCodeAt(end - 1) === 0xfffd) end -= 1;
    let held = 0;
    for (const stop of this.#options.stop) {
      for (let length = Math.min(stop.length - 1, end); length > held; length -= 1) {
        if (text.startsWith(stop.slice(0, length), end - length)) {
          held = length;
          break;
        }
      }
    }
    return end - held;
  }
}

/** The index of the earliest stop string in `text`, or -1. */
export function firstStop(text: string, stops: readonly string[]): number {
  let first = -1;
  for (const stop of stops) {
    const at = text.indexOf(stop);
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  return first;
}
