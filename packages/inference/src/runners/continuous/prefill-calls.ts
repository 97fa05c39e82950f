// The decode loop's prefill calls: newcomers' whole prompts in one left-padded call, or one chunk of a prompt after
// its own past (earlier chunks, or the blocks the prefix cache had), and the choice of which newcomers share a call.
// Every prompt whose prefill completes leaves its whole blocks in the prefix cache.
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import { logitsOf } from './half-float.js';
import type { StepCostModel } from './length-groups.js';
import type { DecodeLoopStats } from './loop-stats.js';
import { prefillFeeds, presentSource } from './padded-batch.js';
import type { KvSource, ModelGeometry } from './padded-batch.js';
import type { PrefixCache } from './prefix-cache.js';
import { releaseBuffers } from './released-buffers.js';
import type { Sequence } from './sequence.js';

const now = () => performance.now();

export class PrefillCalls {
  readonly #session: InferenceSession;
  readonly #geometry: ModelGeometry;
  readonly #stats: DecodeLoopStats;
  readonly #cache: PrefixCache | undefined;
  /** Samples a sequence's first token from the logits of its prompt's last position. */
  readonly #first: (sequence: Sequence, logits: Float32Array) => void;

  constructor(
    session: InferenceSession,
    geometry: ModelGeometry,
    stats: DecodeLoopStats,
    cache: PrefixCache | undefined,
    first: (sequence: Sequence, logits: Float32Array) => void,
  ) {
    this.#session = session;
    this.#geometry = geometry;
    this.#stats = stats;
    this.#cache = cache;
    this.#first = first;
  }

  /** Whether a newcomer's prompt starts with cached blocks (it is then prefilled alone, after them). */
  cached(sequence: Sequence): boolean {
    return (this.#cache?.peek(sequence.prompt, sequence.cacheSalt) ?? 0) > 0;
  }

  /** Readies a newcomer for chunks: its past is the cached prefix when there is one (looked up once, counted). */
  start(sequence: Sequence): void {
    const cached = this.#cache?.take(sequence.prompt, sequence.cacheSalt);
    if (cached === undefined) return;
    sequence.source = cached.source;
    sequence.row = 0;
    sequence.length = cached.length;
    sequence.prefilled = cached.length;
    sequence.cachedTokens = cached.length;
  }

  /**
   * The newcomers of the next padded call, from `waiting` in arrival order: the first always (the caller checked it
   * fits), the others while they fit `budget` (padded to the longest, plus each one's decode token), have no cached
   * prefix, and the padding they add costs less than a call of their own (a padded prompt token costs about what
   * a decoded row does: `rowMs`). At most `free`. Each is looked up in the cache once (a miss).
   */
  pick(waiting: readonly Sequence[], budget: number, free: number, model: StepCostModel): Sequence[] {
    const group: Sequence[] = [];
    let longest = 0;
    for (const sequence of waiting) {
      if (group.length === free) break;
      const padded = Math.max(longest, sequence.prompt.length) * (group.length + 1);
      if (padded + group.length + 1 > budget) continue;
      if (group.length > 0) {
        const wasted = padded - longest * group.length - sequence.prompt.length;
        if (wasted * model.rowMs > model.callMs + model.rowMs || this.cached(sequence)) continue;
      }
      longest = Math.max(longest, sequence.prompt.length);
      group.push(sequence);
    }
    for (const sequence of group) this.#cache?.take(sequence.prompt, sequence.cacheSalt);
    return group;
  }

  /** Prefills whole prompts in one padded call; each gets its first token. */
  async group(group: readonly Sequence[]): Promise<void> {
    const longest = group.reduce((max, sequence) => Math.max(max, sequence.prompt.length), 0);
    const outputs = await this.#run(
      group.map((sequence) => sequence.prompt),
      undefined,
      longest,
    );
    const source = presentSource(outputs, longest, this.#geometry);
    const logits = logitsOf(outputs.logits);
    const { vocabSize } = this.#geometry;
    group.forEach((sequence, index) => {
      sequence.source = source;
      sequence.row = index;
      sequence.length = sequence.prompt.length;
      sequence.prefilled = sequence.prompt.length;
      this.#cache?.store(sequence.prompt, sequence, sequence.cacheSalt);
      const last = (index * longest + longest - 1) * vocabSize;
      this.#first(sequence, logits.subarray(last, last + vocabSize));
    });
    // Logits for every prompt position, a megabyte or more: freed now rather than by the next full collection.
    releaseBuffers([logits]);
  }

  /** Prefills the next `size` tokens of a prompt; returns whether that was its last chunk (it got its first token). */
  async chunk(sequence: Sequence, size: number): Promise<boolean> {
    const chunk = sequence.prompt.slice(sequence.prefilled, sequence.prefilled + size);
    const past = sequence.source === undefined ? undefined : { source: sequence.source, length: sequence.length };
    const outputs = await this.#run([chunk], past, chunk.length);
    // The previous chunk's KV (this sequence's own, read by this run only) and, until the last chunk, the logits.
    if (past !== undefined) releaseBuffers(past.source.data);
    const logits = logitsOf(outputs.logits);
    sequence.length += chunk.length;
    sequence.prefilled += chunk.length;
    sequence.source = presentSource(outputs, sequence.length, this.#geometry);
    sequence.row = 0;
    const last = sequence.prefilled === sequence.prompt.length;
    if (last) {
      this.#cache?.store(sequence.prompt, sequence, sequence.cacheSalt);
      const { vocabSize } = this.#geometry;
      this.#first(sequence, logits.subarray((chunk.length - 1) * vocabSize, chunk.length * vocabSize));
    }
    releaseBuffers([logits]);
    return last;
  }

  async #run(
    chunks: readonly (readonly number[])[],
    past: { readonly source: KvSource; readonly length: number } | undefined,
    longest: number,
  ): Promise<Record<string, Tensor>> {
    const feeds = prefillFeeds(chunks, past, this.#geometry);
    const started = now();
    const outputs = (await this.#session.run(feeds)) as Record<string, Tensor>;
    this.#stats.prefillRunMs += now() - started;
    this.#stats.prefillCalls += 1;
    this.#stats.prefillTokens += chunks.length * longest;
    return outputs;
  }
}
