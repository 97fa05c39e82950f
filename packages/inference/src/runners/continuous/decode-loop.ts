// The iteration-level scheduler: one loop per worker runs decode steps over the active sequences and, between
// them, admits newcomers. Each iteration runs at most `maxStepTokens` tokens (vLLM's `max_num_batched_tokens`):
// one decode step for every running row (a session.run per length group; running rows are never held back), and,
// with what is left, prefills: the next chunk of a prompt being prefilled in chunks, then newcomers in padded
// groups whose padding pays, or, for one whose prompt does not fit a step's room for prefills or starts with
// blocks of the prefix cache (`prefix-cache.ts`), its first chunk after its cached prefix. A newcomer that fits a
// step's room but not what is left of this one waits for the next (one call, not two). A row that finishes or is
// cancelled leaves before the next step: the group's last row takes its slot. A newcomer takes a free slot in the group whose past fits it
// best, or that group is recomposed with it. The groups are recomputed (every row's KV copied) only when the
// modelled saving over the next steps pays for the copy (`running-groups.ts`).
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import { logitsOf } from './half-float.js';
import { releaseBuffers } from './released-buffers.js';
import type { ModelGeometry } from './padded-batch.js';
import type { StepCostModel } from './length-groups.js';
import { PrefillCalls } from './prefill-calls.js';
import { PrefixCache } from './prefix-cache.js';
import type { PrefixCacheCounters } from './prefix-cache.js';
import { RunningGroups } from './running-groups.js';
import { tokenLogprobs } from './logprobs.js';
import { sampleToken } from './sampler.js';
import { applyTokenMask } from '../../grammar/grammar-engine.js';
import type { TokenMatcher } from '../../grammar/grammar-engine.js';
import type { Sequence } from './sequence.js';
import { ActivityCounter } from './loop-activity.js';
import type { ActivityWindow } from './loop-activity.js';
import { emptyLoopStats } from './loop-stats.js';
import type { DecodeLoopStats } from './loop-stats.js';

/** Bounds of the loop. */
export interface DecodeLoopOptions {
  /** The most sequences decoded together (the rows of a step). */
  readonly maxSequences: number;
  /**
   * The most tokens one iteration runs: its decode rows plus its prefill calls' (padded) prompt tokens. A prompt
   * longer than what is left is prefilled in chunks over the next iterations; running rows decode at every one.
   */
  readonly maxStepTokens: number;
  /** The prefix cache's budget in bytes (0: no cache). */
  readonly prefixCacheBytes: number;
  /** The most length groups a decode step is split into (1: one padded batch). */
  readonly maxGroups: number;
  /** The modelled cost of a decode call, which decides the length groups. */
  readonly costModel: StepCostModel;
}

/** What the loop reports to its runner. */
export interface DecodeLoopHooks {
  /** After every iteration: send streamed chunks and settle the requests whose sequences are done. */
  afterIteration(): void;
  /** A model call failed: every sequence in the loop was dropped; fail their requests with `error`. */
  failed(error: unknown): void;
  /** What the loop did since its last report: every `ACTIVITY_REPORT_MS` while it runs, and when it goes idle. */
  activity(window: ActivityWindow): void;
}

const now = () => performance.now();

export class DecodeLoop {
  readonly #session: InferenceSession;
  readonly #geometry: ModelGeometry;
  readonly #options: DecodeLoopOptions;
  readonly #hooks: DecodeLoopHooks;
  readonly #scratch: Float64Array;
  /** The grammar mask of the row being sampled (one bit per token), reused by every structured row. */
  readonly #mask: Int32Array;
  readonly #cache: PrefixCache | undefined;
  readonly #prefills: PrefillCalls;
  #waiting: Sequence[] = [];
  #chunking: Sequence | undefined;
  /** The running rows, by length groups, each with its own left-padded KV cache. */
  readonly #groups: RunningGroups<Sequence>;
  /** Whether `#run` is going: `add` starts it only when it is not. */
  #looping = false;
  /** The sequences that got a token in this iteration, each once, and how many tokens they got. */
  #stepped: Sequence[] = [];
  #stepTokens = 0;
  /** Running rows cancelled since the last removal: they leave the loop at the next one. */
  #leavers = 0;
  readonly #activity = new ActivityCounter();
  readonly stats: DecodeLoopStats = emptyLoopStats();

  constructor(session: InferenceSession, geometry: ModelGeometry, options: DecodeLoopOptions, hooks: DecodeLoopHooks) {
    this.#session = session;
    this.#geometry = geometry;
    this.#options = options;
    this.#hooks = hooks;
    this.#scratch = new Float64Array(geometry.vocabSize);
    this.#mask = new Int32Array(Math.ceil(geometry.vocabSize / 32));
    this.#groups = new RunningGroups<Sequence>(geometry, options.costModel, options.maxGroups, this.stats);
    this.#cache = options.prefixCacheBytes > 0 ? new PrefixCache(geometry, options.prefixCacheBytes) : undefined;
    this.#prefills = new PrefillCalls(session, geometry, this.stats, this.#cache, (sequence, logits) =>
      this.#take(sequence, logits),
    );
  }

  /** The prefix cache's counters and the bytes it holds (all 0 without a cache). */
  prefixCache(): PrefixCacheCounters & { readonly bytes: number } {
    const cache = this.#cache;
    return cache === undefined
      ? { lookups: 0, hits: 0, tokens: 0, evictions: 0, bytes: 0 }
      : { ...cache.counters, bytes: cache.bytes };
  }

  /** Queues sequences; they join the running batch at the next iteration with room for them. */
  add(sequences: readonly Sequence[]): void {
    this.#waiting.push(...sequences);
    if (this.#looping) return;
    this.#looping = true;
    // `#run` catches its own failures (they fail the sequences it holds), so nothing here can reject.
    void this.#run().finally(() => {
      this.#looping = false;
    });
  }

  async #run(): Promise<void> {
    try {
      while (this.#waiting.length > 0 || this.#chunking !== undefined || this.#running().length > 0) {
        const started = now();
        this.stats.iterations += 1;
        this.stats.waitingSum += this.#waiting.length + (this.#chunking === undefined ? 0 : 1);
        this.#dropCancelled();
        const joining = await this.#prefill();
        const composeStart = now();
        const left = this.#groups.remove((sequence) => sequence.done);
        // Finished rows were counted at their last step; cancelled ones leave now.
        this.#activity.left(this.#leavers);
        this.#leavers = 0;
        if (joining.length > 0 || left > 0) {
          if (joining.length > 0 && this.#running().length > 0) this.stats.joinedRunning += joining.length;
          this.#groups.place(joining);
        }
        this.stats.composeMs += now() - composeStart;
        if (this.#running().length > 0) await this.#decode();
        // A report goes out before the answers of the sequences that ended in this step, so whoever hears an answer
        // has heard the step that produced it (a server that drains and exits logs it).
        if (this.#activity.due(this.#endStep())) this.#hooks.activity(this.#activity.take(this.prefixCache()));
        const answerStart = now();
        this.#hooks.afterIteration();
        this.stats.answerMs += now() - answerStart;
        this.stats.loopMs += now() - started;
        // Let the worker's message port deliver newcomers and cancellations before the next iteration.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } catch (error) {
      // A failed model call fails every sequence in the loop: the runner reports it for each request.
      this.#activity.left(this.#running().filter((sequence) => !sequence.done).length);
      for (const sequence of [
        ...this.#waiting,
        ...this.#running(),
        ...(this.#chunking === undefined ? [] : [this.#chunking]),
      ]) {
        sequence.cancelled = true;
      }
      this.#waiting = [];
      this.#groups.clear();
      this.#chunking = undefined;
      this.#stepped = [];
      this.#stepTokens = 0;
      this.#hooks.failed(error);
    }
    // Idle: what the last window saw goes out now rather than with the next burst.
    if (this.#activity.due(true)) this.#hooks.activity(this.#activity.take(this.prefixCache()));
  }

  /**
   * Closes the iteration's step: every sequence that got a token in it learns how many did (the rows that shared the
   * iteration's model calls), which it reports as its batch if it is the most it has shared a step with. Returns
   * whether a sequence ended in it (it leaves the loop; its answer goes out after this iteration).
   */
  #endStep(): boolean {
    const rows = this.#stepped.length;
    if (rows === 0) return false;
    const step = this.stats.iterations;
    let ended = 0;
    for (const sequence of this.#stepped) {
      if (rows > sequence.batchRows) {
        sequence.batchRows = rows;
        sequence.batchStep = step;
      }
      if (sequence.done) ended += 1;
    }
    this.#activity.step(rows, this.#stepTokens);
    this.#activity.left(ended);
    this.#stepped = [];
    this.#stepTokens = 0;
    return ended > 0;
  }

  #dropCancelled(): void {
    const check = (sequence: Sequence) => {
      if (!sequence.cancelled && sequence.isCancelled()) sequence.cancelled = true;
      return !sequence.cancelled;
    };
    this.#waiting = this.#waiting.filter(check);
    if (this.#chunking !== undefined && !check(this.#chunking)) this.#chunking = undefined;
    for (const sequence of this.#running()) {
      // A running row cancelled now leaves at this iteration's removal (one that finished was counted already).
      if (!sequence.done && !check(sequence)) this.#leavers += 1;
    }
  }

  /**
   * Spends the step's token budget on prefills: what is left of `maxStepTokens` after the running rows' decode (each
   * newcomer that gets its first token here also decodes in this step: one token more). First the next chunk of the
   * prompt being prefilled, then newcomers in arrival order: one whose prompt starts with cached blocks, or does not
   * fit a step's room whole, is prefilled in chunks from this step on; the others in padded groups, and one that fits a step's room but not what is left of this one waits for the next step. Returns the
   * sequences that got their first token and keep generating.
   */
  async #prefill(): Promise<Sequence[]> {
    const running = this.#running().filter((sequence) => !sequence.done).length;
    // What a step leaves for prefills: a newcomer whose prompt fits it whole is never cut into chunks.
    const room = this.#options.maxStepTokens - running;
    let budget = room;
    let free = this.#options.maxSequences - running - (this.#chunking === undefined ? 0 : 1);
    const joining: Sequence[] = [];
    while (budget > 0) {
      const chunking = this.#chunking;
      if (chunking !== undefined) {
        const remaining = chunking.prompt.length - chunking.prefilled;
        // The last chunk needs a token more (its decode); without room for it, stop one token short.
        const size = remaining + 1 <= budget ? remaining : Math.min(budget, remaining - 1);
        if (size === 0) break;
        budget -= size;
        if (await this.#prefills.chunk(chunking, size)) {
          budget -= 1;
          this.#chunking = undefined;
          this.#activity.joined(1);
          if (!chunking.done) joining.push(chunking);
        }
        continue;
      }
      const head = this.#waiting[0];
      if (head === undefined || free <= 0) break;
      const cached = this.#prefills.cached(head);
      // One that would fit a step's room but not what is left of this one waits for the next step (where it goes
      // first): one call then instead of a chunk now and the rest in another call.
      if (!cached && head.prompt.length + 1 > budget && head.prompt.length + 1 <= room) break;
      free -= 1;
      if (cached || head.prompt.length + 1 > budget) {
        this.#waiting.shift();
        this.#prefills.start(head);
        this.#chunking = head;
        continue;
      }
      const group = this.#prefills.pick(this.#waiting, budget, free + 1, this.#groups.model);
      const admitted = new Set(group);
      this.#waiting = this.#waiting.filter((sequence) => !admitted.has(sequence));
      free -= group.length - 1;
      budget -= group.length * (group.reduce((max, each) => Math.max(max, each.prompt.length), 0) + 1);
      await this.#prefills.group(group);
      this.#activity.joined(group.length);
      joining.push(...group.filter((sequence) => !sequence.done));
    }
    return joining;
  }

  #running(): Sequence[] {
    return this.#groups.rows();
  }

  /** One decode step: a session.run per length group, then each row samples its next token. */
  async #decode(): Promise<void> {
    const { vocabSize } = this.#geometry;
    let rows = 0;
    for (const group of this.#groups.groups) {
      const count = group.rows.length;
      if (count === 0) continue;
      const feeds = group.feeds();
      const started = now();
      const outputs = (await this.#session.run(feeds)) as Record<string, Tensor>;
      this.stats.decodeRunMs += now() - started;
      this.stats.decodeCalls += 1;
      this.stats.attendedPadded += count * (group.past + 1);
      for (const sequence of group.rows) this.stats.attendedReal += sequence.length + 1;
      rows += count;
      group.stepped(outputs);
      const logits = logitsOf(outputs.logits);
      group.rows.forEach((sequence, row) => {
        // A row cancelled while the step ran still gets its token; it is dropped before the next step.
        this.#take(sequence, logits.subarray(row * vocabSize, (row + 1) * vocabSize));
      });
      releaseBuffers([logits]);
    }
    this.stats.decodeSteps += 1;
    this.stats.decodedRows += rows;
    this.stats.maxRows = Math.max(this.stats.maxRows, rows);
  }

  /** Samples a row's next token and feeds it to its output; a row that finished is dropped before the next step. */
  #take(sequence: Sequence, logits: Float32Array): void {
    const started = now();
    const { grammar } = sequence.sampling;
    const token =
      grammar === undefined
        ? sampleToken(logits, sequence.sampling, this.#scratch)
        : this.#sampleMasked(sequence, grammar, logits);
    if (token < 0) {
      // The grammar allows no token (or its WASM state failed): the row ends with an error, never loops forever.
      this.#register(sequence);
      this.stats.sampleMs += now() - started;
      return;
    }
    sequence.next = token;
    const { logprobs } = sequence.sampling;
    sequence.output.push(token, logprobs === undefined ? undefined : tokenLogprobs(logits, token, logprobs));
    this.stats.generatedTokens += 1;
    this.#stepTokens += 1;
    this.#register(sequence);
    this.stats.sampleMs += now() - started;
  }

  /** Counts the row in this iteration's step, once. */
  #register(sequence: Sequence): void {
    if (sequence.lastStep !== this.stats.iterations) {
      sequence.lastStep = this.stats.iterations;
      this.#stepped.push(sequence);
    }
  }

  /**
   * Samples a structured row: the grammar's mask first (disallowed logits become -Infinity, so temperature and
   * top-p see only what the grammar allows), then the token, which advances the grammar. Returns -1 after failing
   * the row when the grammar allows nothing or its state failed.
   */
  #sampleMasked(sequence: Sequence, grammar: TokenMatcher, logits: Float32Array): number {
    const started = now();
    this.stats.maskedRows += 1;
    let token = -1;
    try {
      grammar.fillNextTokenBitmask(this.#mask);
      if (applyTokenMask(logits, this.#mask) > 0) {
        this.stats.maskMs += now() - started;
        token = sampleToken(logits, sequence.sampling, this.#scratch);
        const accepting = now();
        const accepted = grammar.acceptToken(token);
        this.stats.maskMs += now() - accepting;
        if (accepted) return token;
      }
    } catch {
      // The matcher's WASM instance failed: this row cannot go on; the engine loads a new instance for later rows.
    }
    sequence.failure = "the grammar reached a state the model's vocabulary cannot continue";
    sequence.cancelled = true;
    return -1;
  }
}
