// Continuous (iteration-level) text generation: the runner drives the ONNX session itself through one decode loop
// per worker. Every `run()` call adds its requests to the loop, which merges them into the running batch at its
// next iteration; each request's result (and stream) ends the step its sequence ends.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AutoTokenizer } from '@huggingface/transformers';
import { InferenceSession } from 'onnxruntime-node';
import type { DecodeActivity } from '../contract/decode-activity.js';
import type { ItemResult, StepSlot, WorkerInit } from '../contract/messages.js';
import type { DecodeBatch, TextGenerationOutput, TokenUsage } from '../contract/text-generation-types.js';
import type { TextGenerationRunnerSpec } from '../contract/runner-specs.js';
import { calibrateStepCost } from './continuous/calibrate.js';
import { DecodeLoop } from './continuous/decode-loop.js';
import { MAX_LENGTH_GROUPS } from './continuous/length-groups.js';
import { PREFIX_BLOCK_TOKENS, PrefixCache } from './continuous/prefix-cache.js';
import type { StepCostModel } from './continuous/length-groups.js';
import type { ModelGeometry } from './continuous/padded-batch.js';
import { Sequence } from './continuous/sequence.js';
import { seededRandom } from './continuous/sampler.js';
import { tokenPieces } from './continuous/token-pieces.js';
import type { PieceOf } from './continuous/token-pieces.js';
import type { TokenMatcher } from '../grammar/grammar-engine.js';
import { RunnerGrammars } from '../grammar/runner-grammars.js';
import { serializeError } from '../contract/errors.js';
import { checkGenerationInput } from './generation-request.js';
import type { GenerationRequest } from './generation-request.js';
import { GenerationRow } from './generation-row.js';
import { decoderGeometry } from './decoder-config.js';
import { localModel } from './local-model.js';
import { GRAPH_NAMES } from './model-files.js';
import { partitionValid } from './runner.js';
import { threadCpuMs } from './thread-cpu.js';
import type { EmitStep, Runner } from './runner.js';

type Spec = Required<TextGenerationRunnerSpec>;

type Tokenizer = Awaited<ReturnType<typeof AutoTokenizer.from_pretrained>>;

interface ModelConfig {
  readonly eos_token_id?: number | number[];
  readonly pad_token_id?: number;
  readonly vocab_size?: number;
  readonly [key: string]: unknown;
}

function readJson(path: string): ModelConfig {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as ModelConfig;
  } catch {
    return {};
  }
}

/** Loads the tokenizer (transformers.js) and an onnxruntime session of the graph transformers.js would load. */
export async function loadContinuousGenerationRunner(spec: Spec, init: WorkerInit): Promise<Runner> {
  const { id, file } = localModel(spec.model, init, spec.dtype, GRAPH_NAMES.decoder);
  const tokenizer = await AutoTokenizer.from_pretrained(id);
  const config = readJson(join(spec.model, 'config.json'));
  const generation = readJson(join(spec.model, 'generation_config.json'));
  const session = await InferenceSession.create(file.path, {
    executionProviders: [init.executionProvider],
    intraOpNumThreads: init.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    // The arena keeps the peak of every shape it has seen (a long prompt's prefill) for the life of the worker.
    // Without it a burst's memory goes back to the C allocator (which returns what its policy lets it: BENCHMARKS.md,
    // memory after long prompts), at a price measured here: decode steps took 6-15% more CPU in an interleaved
    // microbenchmark of the loop's shapes, as each run allocates its intermediate tensors afresh.
    enableCpuMemArena: false,
  });
  const pastNames = session.inputNames.filter((name) => name.startsWith('past_key_values.'));
  const presentNames = pastNames.map((name) => name.replace('past_key_values.', 'present.'));
  const missing = ['input_ids', 'attention_mask'].filter((name) => !session.inputNames.includes(name));
  if (config.vocab_size === undefined || !(config.vocab_size > 0)) throw new Error('config.json has no `vocab_size`');
  if (
    pastNames.length === 0 ||
    missing.length > 0 ||
    presentNames.some((name) => !session.outputNames.includes(name))
  ) {
    throw new Error(
      'continuous scheduling needs a decoder with a KV cache (inputs input_ids, attention_mask, past_key_values.*; ' +
        "outputs logits, present.*); use `scheduling: 'request'` for this model",
    );
  }
  // The loop keeps the KV cache in the graph's own type (fp16 exports: float16) and reads logits of either type.
  const kv = session.inputMetadata.find((input) => input.name === pastNames[0]);
  const kvType = kv?.isTensor === true ? kv.type : 'float32';
  if (kvType !== 'float32' && kvType !== 'float16') {
    throw new Error(
      `the decode loop keeps a float32 or float16 KV cache; this graph's \`${kv?.name ?? pastNames[0]}\` is ` +
        `${kvType} (dtype '${file.dtype}'): use \`scheduling: 'request'\``,
    );
  }
  const { kvHeads, headDim, positions } = decoderGeometry(config, session.inputMetadata);
  const geometry: ModelGeometry = {
    pastNames,
    presentNames,
    kvHeads,
    headDim,
    vocabSize: config.vocab_size,
    padTokenId: tokenizer.pad_token_id ?? config.pad_token_id ?? 0,
    positionIds: session.inputNames.includes('position_ids'),
    useCacheBranch: session.inputNames.includes('use_cache_branch'),
    kvType,
  };
  const eos = generation.eos_token_id ?? config.eos_token_id ?? tokenizer.eos_token_id;
  const blockBytes = PrefixCache.blockBytes(geometry);
  if (spec.prefixCacheMb > 0 && spec.prefixCacheMb * 2 ** 20 < blockBytes) {
    throw new Error(
      `runner.prefixCacheMb (${spec.prefixCacheMb}) holds no ${PREFIX_BLOCK_TOKENS}-token block of this model ` +
        `(${(blockBytes / 2 ** 20).toFixed(3)} MiB each): give it at least that, or 0 for no prefix cache`,
    );
  }
  const costModel = await calibrateStepCost(session, geometry);
  return new ContinuousGenerationRunner(init.index, spec, tokenizer, session, geometry, costModel, {
    contextLength: spec.contextLength > 0 ? spec.contextLength : (positions ?? 512),
    eosTokenIds: new Set<number>([eos ?? []].flat().map(Number)),
  });
}

/** The prefix cache's counters as runner stats. */
function prefixCacheStats(cache: ReturnType<DecodeLoop['prefixCache']>): Record<string, number> {
  return {
    prefixCacheLookups: cache.lookups,
    prefixCacheHits: cache.hits,
    prefixCacheTokens: cache.tokens,
    prefixCacheEvictions: cache.evictions,
    prefixCacheBytes: cache.bytes,
  };
}

/** One input of a `run()` call: its sequence, and whether its first chunk (which carries its batch) went out. */
interface TaskItem {
  readonly index: number;
  readonly sequence: Sequence;
  streamed: boolean;
}

/** One `run()` call: its inputs' sequences and how to answer it. */
interface Task {
  readonly size: number;
  readonly items: readonly TaskItem[];
  readonly results: ItemResult[];
  readonly emit: EmitStep | undefined;
  readonly resolve: (results: ItemResult[]) => void;
  readonly reject: (error: unknown) => void;
}

class ContinuousGenerationRunner implements Runner {
  readonly #spec: Spec;
  readonly #tokenizer: Tokenizer;
  readonly #facts: { readonly contextLength: number; readonly eosTokenIds: ReadonlySet<number> };
  readonly #loop: DecodeLoop;
  readonly #costModel: StepCostModel;
  readonly #decode: (ids: readonly number[]) => string;
  readonly #pieceOf: PieceOf | undefined;
  readonly #tasks = new Set<Task>();
  /** Prefix of this worker's step ids: its index, and a nonce so a replaced worker's steps are not taken for its own. */
  readonly #stepPrefix: string;
  #onActivity: ((activity: DecodeActivity) => void) | undefined;
  #arrivals = 0;
  readonly #vocabSize: number;
  /** Structured outputs' grammars, loaded at the first request with one. */
  #grammars: RunnerGrammars | undefined;

  constructor(
    worker: number,
    spec: Spec,
    tokenizer: Tokenizer,
    session: InferenceSession,
    geometry: ModelGeometry,
    costModel: StepCostModel,
    facts: { readonly contextLength: number; readonly eosTokenIds: ReadonlySet<number> },
  ) {
    this.#spec = spec;
    this.#stepPrefix = `w${worker}-${randomBytes(2).toString('hex')}`;
    this.#tokenizer = tokenizer;
    this.#facts = facts;
    this.#costModel = costModel;
    this.#vocabSize = geometry.vocabSize;
    this.#decode = (ids) => tokenizer.decode([...ids], { skip_special_tokens: true });
    const anchor = tokenizer.encode('a', { add_special_tokens: false })[0];
    this.#pieceOf = anchor === undefined ? undefined : tokenPieces(this.#decode, geometry.vocabSize, anchor);
    this.#loop = new DecodeLoop(
      session,
      geometry,
      {
        maxSequences: spec.maxSequences,
        maxStepTokens: spec.maxStepTokens,
        prefixCacheBytes: Math.floor(spec.prefixCacheMb * 2 ** 20),
        maxGroups: MAX_LENGTH_GROUPS,
        costModel,
      },
      {
        afterIteration: () => this.#afterIteration(),
        failed: (error) => this.#failAll(error),
        activity: (window) => this.#onActivity?.({ worker, ...window }),
      },
    );
  }

  async run(
    inputs: readonly unknown[],
    emit: EmitStep | undefined,
    cancelled: () => boolean = () => false,
  ): Promise<ItemResult[]> {
    const results: ItemResult[] = new Array(inputs.length);
    const checked = partitionValid(inputs, (input) => this.#check(input), results);
    // Grammars compile here, before their rows join the loop (between its iterations, never inside a step); one that
    // does not compile or that the vocabulary cannot start fails its input alone.
    const valid: { readonly index: number; readonly value: GenerationRequest; readonly grammar?: TokenMatcher }[] = [];
    for (const item of checked) {
      if (item.value.grammar === undefined) {
        valid.push(item);
        continue;
      }
      try {
        const grammar = await this.#matcher(item.value);
        valid.push({ ...item, grammar });
      } catch (error) {
        results[item.index] = { ok: false, error: serializeError(error) };
      }
    }
    if (emit !== undefined && valid.length < inputs.length) {
      emit(results.map((result): StepSlot => (result !== undefined && !result.ok ? { error: result.error } : null)));
    }
    if (valid.length === 0) return results;
    return new Promise((resolve, reject) => {
      const items = valid.map(({ index, value, grammar }) => ({
        index,
        sequence: this.#sequence(value, cancelled, grammar),
        streamed: false,
      }));
      this.#tasks.add({ size: inputs.length, items, results, emit, resolve, reject });
      this.#loop.add(items.map((item) => item.sequence));
    });
  }

  onActivity(listener: (activity: DecodeActivity) => void): void {
    this.#onActivity = listener;
  }

  stats(): Record<string, number> {
    const { callMs, rowMs, rowPastMs, copyMs } = this.#costModel;
    return {
      ...this.#loop.stats,
      ...prefixCacheStats(this.#loop.prefixCache()),
      costCallMs: callMs,
      costRowMs: rowMs,
      costRowPastMs: rowPastMs,
      costCopyMs: copyMs,
      pieceTable: this.#pieceOf === undefined ? 0 : 1,
      threadCpuMs: threadCpuMs(),
    };
  }

  /** A matcher for the request's grammar, with the tokens of a resumed stream already accepted. */
  #matcher(request: GenerationRequest): Promise<TokenMatcher> {
    this.#grammars ??= new RunnerGrammars(this.#spec.model, this.#vocabSize, [...this.#facts.eosTokenIds]);
    return this.#grammars.matcher(request.grammar as NonNullable<GenerationRequest['grammar']>, request.resume);
  }

  #sequence(request: GenerationRequest, cancelled: () => boolean, grammar?: TokenMatcher): Sequence {
    const arrival = this.#arrivals++;
    // A request's own seed alone decides its stream: the same seed draws the same tokens whatever else runs.
    const seed =
      request.seed !== undefined
        ? Math.imul(request.seed >>> 0, 0x9e3779b1) >>> 0
        : this.#spec.seed >= 0
          ? (Math.imul(this.#spec.seed + 1, 0x9e3779b1) ^ arrival) >>> 0
          : (Math.random() * 2 ** 32) >>> 0;
    const { resume } = request;
    const output = new GenerationRow({
      promptTokens: request.ids.length,
      maxNewTokens: request.maxNewTokens,
      stop: request.stop,
      eosTokenIds: this.#facts.eosTokenIds,
      decode: this.#decode,
      ...(this.#pieceOf === undefined ? {} : { pieceOf: this.#pieceOf }),
      tokenChunks: resume !== undefined,
    });
    // A resumed stream: its sent tokens are prefilled after the prompt, as ids, and their text is not sent again.
    if (resume !== undefined) output.replay(resume);
    return new Sequence(
      resume === undefined || resume.length === 0 ? request.ids : [...request.ids, ...resume],
      output,
      {
        temperature: request.temperature,
        topP: request.topP,
        random: seededRandom(seed),
        ...(request.logprobs === undefined ? {} : { logprobs: request.logprobs }),
        ...(grammar === undefined ? {} : { grammar }),
      },
      cancelled,
      request.cacheSalt,
    );
  }

  /** Streams the step's chunks and answers each request whose sequences are all done. */
  #afterIteration(): void {
    for (const task of this.#tasks) {
      if (task.emit !== undefined) {
        let any = false;
        const slots: StepSlot[] = new Array<StepSlot>(task.size).fill(null);
        for (const item of task.items) {
          const { index, sequence } = item;
          if (sequence.cancelled) continue;
          const chunk = sequence.output.takeChunk();
          if (chunk !== null) {
            // The first chunk says which step batched the sequence so far (a server sends it as headers).
            const last = chunk.usage === null ? chunk : { ...chunk, usage: this.#usageOf(sequence, chunk.usage) };
            slots[index] = { chunk: item.streamed ? last : { ...last, batch: this.#batchOf(sequence) } };
            item.streamed = true;
            any = true;
          }
        }
        if (any) task.emit(slots);
      }
      if (task.items.every((item) => item.sequence.done)) {
        for (const { index, sequence } of task.items) {
          task.results[index] =
            sequence.failure !== undefined
              ? { ok: false, error: { code: 'INVALID_INPUT', message: sequence.failure, field: 'grammar' } }
              : sequence.cancelled
                ? { ok: false, error: { code: 'HANDLER_ERROR', message: 'Generation cancelled' } }
                : { ok: true, value: this.#outputOf(sequence) };
          sequence.sampling.grammar?.dispose();
        }
        this.#tasks.delete(task);
        task.resolve(task.results);
      }
    }
  }

  /** A finished sequence's result: its output, with what it reused of the prefix cache, and its batch. */
  #outputOf(sequence: Sequence): TextGenerationOutput {
    const output = sequence.output.output();
    return { ...output, usage: this.#usageOf(sequence, output.usage), batch: this.#batchOf(sequence) };
  }

  /**
   * A sequence's usage with `prompt_tokens_details.cached_tokens` (what the loop took from the prefix cache for it)
   * when this runner has a prefix cache; as it is without one, so a server leaves the field out.
   */
  #usageOf(sequence: Sequence, usage: TokenUsage): TokenUsage {
    if (this.#spec.prefixCacheMb <= 0) return usage;
    return { ...usage, prompt_tokens_details: { cached_tokens: sequence.cachedTokens } };
  }

  /** The most sequences that shared a step with this one, and the id of the first step with that many. */
  #batchOf(sequence: Sequence): DecodeBatch {
    return { id: `${this.#stepPrefix}:${sequence.batchStep}`, size: sequence.batchRows };
  }

  #failAll(error: unknown): void {
    for (const task of this.#tasks) {
      for (const { sequence } of task.items) sequence.sampling.grammar?.dispose();
      task.reject(error);
    }
    this.#tasks.clear();
  }

  #check(input: unknown): GenerationRequest {
    return checkGenerationInput(input, this.#spec, (text) => this.#tokenizer.encode(text), this.#facts.contextLength);
  }
}
