import {
  AutoModelForCausalLM,
  AutoTokenizer,
  LogitsProcessor,
  StoppingCriteria,
  Tensor,
  random,
} from '@huggingface/transformers';
import { InputError, serializeError } from '../contract/errors.js';
import type { ItemResult, StepSlot, WorkerInit } from '../contract/messages.js';
import { samplingKey } from '../spec/runner-spec.js';
import type { TextGenerationRunnerSpec } from '../contract/runner-specs.js';
import type { TokenMatcher } from '../grammar/grammar-engine.js';
import { RunnerGrammars } from '../grammar/runner-grammars.js';
import { checkGenerationInput } from './generation-request.js';
import { GRAMMAR_DEAD_END, GrammarLogitsProcessor } from './grammar-logits.js';
import type { GenerationRequest as Request } from './generation-request.js';
import { GenerationRow } from './generation-row.js';
import { localModel } from './local-model.js';
import { GRAPH_NAMES } from './model-files.js';
import { recomputeWithoutKvCache } from './recompute-generation.js';
import { partitionValid } from './runner.js';
import { threadCpuMs } from './thread-cpu.js';
import type { EmitStep, Runner } from './runner.js';

type Spec = Required<TextGenerationRunnerSpec>;
type Tokenizer = Awaited<ReturnType<typeof AutoTokenizer.from_pretrained>>;
type Model = Awaited<ReturnType<typeof AutoModelForCausalLM.from_pretrained>>;

/** Feeds every step's tokens to the rows and tells `generate()` which rows are done. */
class RowStoppingCriteria extends StoppingCriteria {
  readonly #rows: readonly GenerationRow[];
  readonly #onStep: () => void;
  readonly #cancelled: () => boolean;

  constructor(rows: readonly GenerationRow[], onStep: () => void, cancelled: () => boolean) {
    super();
    this.#rows = rows;
    this.#onStep = onStep;
    this.#cancelled = cancelled;
  }

  override _call(inputIds: number[][]): boolean[] {
    // A cancelled batch stops after this token: its results are discarded anyway.
    if (this.#cancelled()) return this.#rows.map(() => true);
    this.#rows.forEach((row, index) => row.push(Number(inputIds[index]?.at(-1))));
    this.#onStep();
    return this.#rows.map((row) => row.finished);
  }
}

/** What the runner reads from the model's config once, at load. */
interface ModelFacts {
  readonly contextLength: number;
  readonly eosTokenIds: ReadonlySet<number>;
  readonly padTokenId: number;
  /** The logits' width (`config.vocab_size`). */
  readonly vocabSize: number;
}

/**
 * Request-level scheduling: each batch is one transformers.js `generate()` call that runs until its longest row
 * ends. Kept for comparison with the continuous runner (`scheduling: 'request'`).
 */
export async function loadTextGenerationRunner(spec: Spec, init: WorkerInit): Promise<Runner> {
  const { id, options } = localModel(spec.model, init, spec.dtype, GRAPH_NAMES.decoder);
  const tokenizer = await AutoTokenizer.from_pretrained(id);
  const model = await AutoModelForCausalLM.from_pretrained(id, options);
  // A graph without a KV cache (the scheduling rules' fallback from continuous) is fed its whole sequence each step.
  recomputeWithoutKvCache(model);
  if (spec.seed >= 0) random.seed(spec.seed);
  const config = model.config as {
    vocab_size?: number;
    max_position_embeddings?: number;
    eos_token_id?: number | number[];
    pad_token_id?: number;
  };
  const eos = model.generation_config?.eos_token_id ?? config.eos_token_id ?? tokenizer.eos_token_id;
  return new TextGenerationRunner(spec, tokenizer, model, {
    contextLength: spec.contextLength > 0 ? spec.contextLength : (config.max_position_embeddings ?? 512),
    eosTokenIds: new Set<number>([eos ?? []].flat().map(Number)),
    // Padded positions are masked out, so any id works; the tokenizer's own pad id keeps logs readable.
    padTokenId: tokenizer.pad_token_id ?? config.pad_token_id ?? 0,
    vocabSize: config.vocab_size ?? 0,
  });
}

class TextGenerationRunner implements Runner {
  readonly #spec: Spec;
  readonly #tokenizer: Tokenizer;
  readonly #model: Model;
  readonly #facts: ModelFacts;
  /** Structured outputs' grammars, loaded at the first request with one. */
  #grammars: RunnerGrammars | undefined;

  constructor(spec: Spec, tokenizer: Tokenizer, model: Model, facts: ModelFacts) {
    this.#spec = spec;
    this.#tokenizer = tokenizer;
    this.#model = model;
    this.#facts = facts;
  }

  stats(): Record<string, number> {
    return { threadCpuMs: threadCpuMs() };
  }

  async run(
    inputs: readonly unknown[],
    emit: EmitStep | undefined,
    cancelled: () => boolean = () => false,
  ): Promise<ItemResult[]> {
    const results: ItemResult[] = new Array(inputs.length);
    const checked = partitionValid(inputs, (input) => this.#check(input), results);
    // Grammars compile before the batch's generate(); one that does not compile or cannot start fails its input.
    const valid: { readonly index: number; readonly value: Request; readonly grammar?: TokenMatcher }[] = [];
    for (const item of checked) {
      if (item.value.grammar === undefined) {
        valid.push(item);
        continue;
      }
      try {
        this.#grammars ??= new RunnerGrammars(this.#spec.model, this.#facts.vocabSize, [...this.#facts.eosTokenIds]);
        valid.push({ ...item, grammar: await this.#grammars.matcher(item.value.grammar, undefined) });
      } catch (error) {
        results[item.index] = { ok: false, error: serializeError(error) };
      }
    }
    if (emit !== undefined && valid.length < inputs.length) {
      emit(results.map((result): StepSlot => (result !== undefined && !result.ok ? { error: result.error } : null)));
    }
    // The runner partitions too, so a batcher without `textGenerationBatchKey` never mixes sampling parameters.
    const groups = new Map<string, typeof valid>();
    for (const item of valid) {
      const key = samplingKey(item.value.temperature, item.value.topP);
      groups.set(key, [...(groups.get(key) ?? []), item]);
    }
    for (const group of groups.values()) {
      const { rows, failed } = await this.#generate(
        group.map((item) => item.value),
        group.map((item) => item.grammar),
        (chunks) => emit?.(spread(inputs.length, group, chunks)),
        emit !== undefined,
        cancelled,
      );
      group.forEach((item, position) => {
        item.grammar?.dispose();
        results[item.index] = failed.has(position)
          ? { ok: false, error: { code: 'INVALID_INPUT', message: GRAMMAR_DEAD_END, field: 'grammar' } }
          : { ok: true, value: (rows[position] as GenerationRow).output() };
      });
    }
    return results;
  }

  async #generate(
    requests: readonly Request[],
    grammars: readonly (TokenMatcher | undefined)[],
    onChunks: (chunks: readonly StepSlot[]) => void,
    streaming: boolean,
    cancelled: () => boolean,
  ): Promise<{ readonly rows: GenerationRow[]; readonly failed: ReadonlySet<number> }> {
    const decode = (ids: readonly number[]) => this.#tokenizer.decode([...ids], { skip_special_tokens: true });
    const rows = requests.map(
      (request) =>
        new GenerationRow({
          promptTokens: request.ids.length,
          maxNewTokens: request.maxNewTokens,
          stop: request.stop,
          eosTokenIds: this.#facts.eosTokenIds,
          decode,
        }),
    );
    const sendChunks = () => {
      const chunks = rows.map((row): StepSlot => {
        const chunk = row.takeChunk();
        return chunk === null ? null : { chunk };
      });
      if (chunks.some((chunk) => chunk !== null)) onChunks(chunks);
    };
    const { temperature, topP } = requests[0] as Request;
    const doSample = temperature > 0;
    const masks = grammars.some((grammar) => grammar !== undefined)
      ? new GrammarLogitsProcessor(grammars, rows, this.#facts.vocabSize)
      : undefined;
    // The grammar's mask goes first: top-p then renormalizes over what the grammar allows.
    const processors = [
      ...(masks === undefined ? [] : [masks]),
      ...(doSample && topP < 1 ? [new TopPLogitsProcessor(topP)] : []),
    ];
    await this.#model.generate({
      ...this.#leftPadded(requests),
      max_new_tokens: Math.max(...requests.map((request) => request.maxNewTokens)),
      do_sample: doSample,
      temperature: doSample ? temperature : 1,
      // 0 disables transformers.js' default top-k of 50, so only temperature and top_p shape the distribution.
      top_k: 0,
      stopping_criteria: [new RowStoppingCriteria(rows, streaming ? sendChunks : () => undefined, cancelled)],
      logits_processor: processors.length > 0 ? processors : null,
    } as unknown as Parameters<Model['generate']>[0]);
    for (const row of rows) row.forceFinish();
    if (streaming) sendChunks();
    return { rows, failed: masks?.failed ?? new Set() };
  }

  /** `input_ids` and `attention_mask` with padding on the left: decoder-only models continue from the last position. */
  #leftPadded(requests: readonly Request[]): { input_ids: Tensor; attention_mask: Tensor } {
    const length = Math.max(...requests.map((request) => request.ids.length));
    const ids = new BigInt64Array(requests.length * length).fill(BigInt(this.#facts.padTokenId));
    const mask = new BigInt64Array(requests.length * length);
    requests.forEach((request, row) => {
      const start = row * length + length - request.ids.length;
      request.ids.forEach((id, k) => {
        ids[start + k] = BigInt(id);
        mask[start + k] = 1n;
      });
    });
    const dims = [requests.length, length];
    return { input_ids: new Tensor('int64', ids, dims), attention_mask: new Tensor('int64', mask, dims) };
  }

  #check(input: unknown): Request {
    const request = checkGenerationInput(
      input,
      this.#spec,
      (text) => this.#tokenizer.encode(text),
      this.#facts.contextLength,
    );
    // generate() samples a whole batch from one stream and does not expose its logits: refused, never ignored.
    for (const field of ['seed', 'logprobs', 'resume'] as const) {
      if (request[field] !== undefined) {
        const name = field === 'resume' ? 'resume_tokens' : field;
        throw new InputError(name, `\`${name}\` needs continuous scheduling; this model runs with 'request'`);
      }
    }
    return request;
  }
}

/** Places a group's slots at its items' positions in the whole batch. */
function spread(size: number, group: readonly { readonly index: number }[], slots: readonly StepSlot[]): StepSlot[] {
  const all: StepSlot[] = new Array<StepSlot>(size).fill(null);
  group.forEach((item, position) => {
    all[item.index] = slots[position] ?? null;
  });
  return all;
}

/**
 * Nucleus (top-p) filtering. transformers.js 4.3 reads `top_p` from the generation config but never applies it
 * (its `TopPLogitsWarper` has no `_call`), so the runner adds this processor itself. It runs after the built-in
 * temperature warper, as in Python transformers.
 */
class TopPLogitsProcessor extends LogitsProcessor {
  readonly #topP: number;

  constructor(topP: number) {
    super();
    this.#topP = topP;
  }

  override _call(_inputIds: bigint[][], logits: Tensor): Tensor {
    const data = logits.data as Float32Array;
    const vocab = logits.dims.at(-1) ?? data.length;
    for (let offset = 0; offset < data.length; offset += vocab) {
      filterRow(data.subarray(offset, offset + vocab), this.#topP);
    }
    return logits;
  }
}

/** Keeps the smallest set of most likely tokens whose probabilities reach `topP`; the rest become -Infinity. */
function filterRow(row: Float32Array, topP: number): void {
  let max = Number.NEGATIVE_INFINITY;
  for (const value of row) if (value > max) max = value;
  const weights = Array.from(row, (value) => Math.exp(value - max));
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  const order = weights.map((_, index) => index).sort((a, b) => (weights[b] as number) - (weights[a] as number));
  let mass = 0;
  let kept = 0;
  while (kept < order.length && mass < topP * total) {
    mass += weights[order[kept] as number] as number;
    kept += 1;
  }
  for (let rank = Math.max(kept, 1); rank < order.length; rank += 1)
    row[order[rank] as number] = Number.NEGATIVE_INFINITY;
}
