import type {
  FinishReason,
  TextGenerationChunk,
  TextGenerationOutput,
  TokenLogprob,
  TokenUsage,
  TopLogprob,
} from '../contract/text-generation-types.js';

/**
 * A generated token's log-probability and its step's most likely tokens, as ids: what a runner hands
 * {@link GenerationRow.push} (the continuous loop reads it from its logits in `continuous/logprobs.ts`).
 */
export interface RawLogprob {
  readonly logprob: number;
  /** `[id, logprob]`, most likely first. */
  readonly top: ReadonlyArray<readonly [id: number, logprob: number]>;
}

/** What one row of a batched generation needs to know to decide when it is done. */
export interface GenerationRowOptions {
  readonly promptTokens: number;
  readonly maxNewTokens: number;
  readonly stop: readonly string[];
  readonly eosTokenIds: ReadonlySet<number>;
  /** Decodes generated ids to text (special tokens skipped). */
  readonly decode: (ids: readonly number[]) => string;
  /**
   * The text a token adds after others, when a lookup can say (see `token-pieces.ts`); rows decode a short window
   * where it returns `undefined`.
   */
  readonly pieceOf?: (id: number) => string | undefined;
  /** Each chunk carries the ids generated since the previous one (`tokens`), so another worker can resume it. */
  readonly tokenChunks?: boolean;
}

/**
 * One request's view of a batched generation: it records its own end (EOS, stop string, its own
 * `max_new_tokens`) and ignores the tokens a batch may generate after it.
 *
 * Text is decoded incrementally, as TGI does: each step decodes only a short window (the last emitted token(s) and
 * the new ones) twice and appends the difference, so a step costs the same at token 5 as at token 500. A window
 * whose text ends in U+FFFD (an unfinished multi-byte character) waits for more tokens. The final text is one
 * decode of all ids, cut at the first stop string: streamed pieces are prefixes of it, so they add up to the
 * non-streamed text.
 */
export class GenerationRow {
  readonly #options: GenerationRowOptions;
  readonly #ids: number[] = [];
  readonly #longestStop: number;
  /** Settled text decoded so far (incrementally), cut at a stop string once one appears. */
  #text = '';
  /** The decode window: ids[#prefix, #read) is already in `#text`; ids[#read, end) is not yet. */
  #prefix = 0;
  #read = 0;
  #finish: FinishReason | null = null;
  #final: string | undefined;
  #emitted = 0;
  #reported = false;
  /** Each generated token's log-probability, when the request asked for them; `#logprobsSent` went out in chunks. */
  #logprobs: TokenLogprob[] | undefined;
  #logprobsSent = 0;
  /** Ids that went out in chunks (`tokenChunks`). */
  #tokensSent = 0;

  constructor(options: GenerationRowOptions) {
    this.#options = options;
    this.#longestStop = Math.max(0, ...options.stop.map((stop) => stop.length));
  }

  get finished(): boolean {
    return this.#finish !== null;
  }

  /** Tokens generated so far. */
  get generated(): number {
    return this.#ids.length;
  }

  /** Adds the token generated for this row in the latest step (with its log-probability when it was asked for). */
  push(id: number, logprob?: RawLogprob): void {
    if (this.#finish !== null) return;
    this.#ids.push(id);
    if (logprob !== undefined) (this.#logprobs ??= []).push(this.#tokenLogprob(id, logprob));
    if (this.#options.eosTokenIds.has(id)) {
      this.#end('stop');
      return;
    }
    const { stop } = this.#options;
    // Nothing pending and a known piece: append it (the window then restarts at this token).
    const piece = this.#read === this.#ids.length - 1 && this.#read > 0 ? this.#options.pieceOf?.(id) : undefined;
    let added: string | undefined;
    if (piece !== undefined) {
      added = piece;
    } else {
      const before = this.#decode(this.#ids.slice(this.#prefix, this.#read));
      const after = this.#decode(this.#ids.slice(this.#prefix));
      if (after.length > before.length && !after.endsWith('\ufffd')) added = after.slice(before.length);
    }
    if (added !== undefined) {
      const from = Math.max(0, this.#text.length - this.#longestStop + 1);
      this.#text += added;
      this.#prefix = this.#read;
      this.#read = this.#ids.length;
      const stopAt = firstStop(this.#text, stop, from);
      if (stopAt >= 0) {
        this.#text = this.#text.slice(0, stopAt);
        this.#end('stop');
        return;
      }
    }
    if (this.#ids.length >= this.#options.maxNewTokens) this.#end('length');
  }

  /**
   * Takes `ids` as already generated and sent (a resumed stream): pushed as if generated, and what their text
   * settled to counts as sent, as it had when their last chunk went out. Ids that end the row (an end-of-sequence
   * token, a stop string, `max_new_tokens`) were carried by its final chunk, so that chunk went out too: nothing is
   * left to send, and the row only answers `output()`.
   */
  replay(ids: readonly number[]): void {
    for (const id of ids) this.push(id);
    this.#tokensSent = this.#ids.length;
    if (this.#finish !== null) {
      this.#emitted = (this.#final ?? this.#text).length;
      this.#reported = true;
      return;
    }
    this.#emitted = this.#settledEnd();
  }

  /** Ends a row the model stopped early for a reason of its own (a global length limit). */
  forceFinish(): void {
    if (this.#finish === null) this.#end('length');
  }

  /**
   * The streamed slot for the latest step: the new settled text, the final chunk when the row just finished, or
   * `null` when there is nothing to send (nothing new yet, or the final chunk already went out).
   */
  takeChunk(): TextGenerationChunk | null {
    if (this.#reported) return null;
    const text = this.#final ?? this.#text;
    const end = this.#finish === null ? this.#settledEnd() : text.length;
    const piece = end > this.#emitted ? text.slice(this.#emitted, end) : '';
    this.#emitted = Math.max(this.#emitted, end);
    if (this.#finish !== null) {
      this.#reported = true;
      return {
        text: piece,
        finish_reason: this.#finish,
        usage: this.#usage(),
        ...this.#newLogprobs(),
        ...this.#newTokens(),
      };
    }
    return piece.length > 0
      ? { text: piece, finish_reason: null, usage: null, ...this.#newLogprobs(), ...this.#newTokens() }
      : null;
  }

  /** The row's final result. */
  output(): TextGenerationOutput {
    const output = { text: this.#final ?? this.#text, finish_reason: this.#finish ?? 'length', usage: this.#usage() };
    return this.#logprobs === undefined ? output : { ...output, logprobs: this.#logprobs };
  }

  /** The log-probabilities not yet sent in a chunk (every token's, including those a stop string cut). */
  #newLogprobs(): { logprobs?: readonly TokenLogprob[] } {
    if (this.#logprobs === undefined) return {};
    const logprobs = this.#logprobs.slice(this.#logprobsSent);
    this.#logprobsSent = this.#logprobs.length;
    return { logprobs };
  }

  /** The ids not yet sent in a chunk, when chunks carry them. */
  #newTokens(): { tokens?: readonly number[] } {
    if (this.#options.tokenChunks !== true) return {};
    const tokens = this.#ids.slice(this.#tokensSent);
    this.#tokensSent = this.#ids.length;
    return { tokens };
  }

  #tokenLogprob(id: number, { logprob, top }: RawLogprob): TokenLogprob {
    const entry = (token: number, value: number): TopLogprob => {
      const text = this.#options.pieceOf?.(token) ?? this.#decode([token]);
      return { token: text, logprob: value, bytes: [...Buffer.from(text, 'utf8')] };
    };
    return { ...entry(id, logprob), top_logprobs: top.map(([token, value]) => entry(token, value)) };
  }

  #end(reason: FinishReason): void {
    this.#finish = reason;
    // One full decode: it keeps a trailing unfinished character as the tokenizer renders it (U+FFFD).
    const full = this.#decode(this.#ids);
    const stopAt = firstStop(full, this.#options.stop);
    this.#final = stopAt >= 0 ? full.slice(0, stopAt) : full;
  }

  #decode(ids: readonly number[]): string {
    return ids.length === 0 ? '' : this.#options.decode(ids);
  }

  #usage(): TokenUsage {
    const { promptTokens } = this.#options;
    return {
      prompt_tokens: promptTokens,
      completion_tokens: this.#ids.length,
      total_tokens: promptTokens + this.#ids.length,
    };
  }

  /** How much of the current text cannot change any more: it holds back any tail that could still become a stop string. */
  #settledEnd(): number {
    const text = this.#text;
    const end = text.length;
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

/** The index of the earliest stop string in `text` (searching from `from`), or -1. */
export function firstStop(text: string, stops: readonly string[], from = 0): number {
  let first = -1;
  for (const stop of stops) {
    const at = text.indexOf(stop, from);
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  return first;
}
