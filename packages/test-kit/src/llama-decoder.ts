// A Llama-shaped ONNX decoder with made-up weights (as vLLM's `--load-format dummy`): the architecture of the real
// thing (grouped-query attention, RMSNorm, SwiGLU MLP, rotary embeddings, a KV cache) in the layout transformers.js
// exports use, so the runners load it unchanged. Its text is noise; its timing is the real model's. The graph is the
// same as the bundled tinystories-656k's, with every size a parameter.
import { copyFile, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DataType, writeModel } from './onnx-writer.js';
import type { Initializer, NodeSpec, ValueInfo } from './onnx-writer.js';

/** The sizes of a generated decoder. */
export interface LlamaShape {
  readonly hidden: number;
  readonly layers: number;
  /** Query heads. */
  readonly heads: number;
  /** Key/value heads (grouped-query attention when fewer than `heads`; must divide it). */
  readonly kvHeads: number;
  /** The SwiGLU MLP's width. */
  readonly intermediate: number;
  readonly vocab: number;
  /** `max_position_embeddings`. */
  readonly positions: number;
  /** Seeds the weights: the same shape and seed give the same bytes. */
  readonly seed: number;
  /**
   * Each head's size, when not `hidden / heads` (Gemma's `head_dim`: the query and output projections are then
   * `hidden x heads * headDim`). Must be even.
   * @default hidden / heads
   */
  readonly headDim?: number;
}

/** A shape's head size: its own `headDim`, else `hidden / heads`. */
const headDimOf = (shape: Pick<LlamaShape, 'hidden' | 'heads' | 'headDim'>): number =>
  shape.headDim ?? shape.hidden / shape.heads;

const EOS_TOKEN_ID = 2;
const RMS_EPS = 1e-6;
const ROPE_THETA = 10_000;

/** The parameters of a shape (tied input/output embedding counted once), as `config.json` reports them. */
export function llamaParameters(shape: LlamaShape): number {
  const headDim = headDimOf(shape);
  const attention = 2 * shape.hidden * shape.heads * headDim + 2 * shape.hidden * shape.kvHeads * headDim;
  const mlp = 3 * shape.hidden * shape.intermediate;
  return shape.vocab * shape.hidden + shape.layers * (attention + mlp + 2 * shape.hidden) + shape.hidden;
}

function checkShape(shape: LlamaShape): void {
  for (const [key, value] of Object.entries(shape)) {
    if (!Number.isInteger(value) || value < (key === 'seed' ? 0 : 1)) {
      throw new TypeError(`Expected \`${key}\` to be a positive integer, got \`${String(value)}\``);
    }
  }
  if (shape.headDim !== undefined) {
    if (shape.headDim % 2 !== 0) throw new TypeError(`Expected \`headDim\` (${shape.headDim}) to be even`);
  } else if (shape.hidden % shape.heads !== 0 || (shape.hidden / shape.heads) % 2 !== 0) {
    throw new TypeError(`Expected \`hidden\` (${shape.hidden}) to split into \`heads\` (${shape.heads}) of even size`);
  }
  if (shape.heads % shape.kvHeads !== 0) {
    throw new TypeError(`Expected \`kvHeads\` (${shape.kvHeads}) to divide \`heads\` (${shape.heads})`);
  }
}

/** Uniform values on [-scale, scale) from a mulberry32 stream seeded by `seed`: fast and the same every time. */
function uniform(length: number, scale: number, seed: number): Float32Array {
  const values = new Float32Array(length);
  let state = seed >>> 0;
  for (let i = 0; i < length; i += 1) {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    values[i] = ((((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1) * scale;
  }
  return values;
}

const float = (name: string, dims: number[], values: ArrayLike<number>): Initializer => ({
  name,
  type: DataType.FLOAT,
  dims,
  values,
});
const int64 = (name: string, dims: number[], values: number[]): Initializer => ({
  name,
  type: DataType.INT64,
  dims,
  values,
});

/** The graph's constants: rotary tables, mask values, reshape targets. */
function constants(shape: LlamaShape): Initializer[] {
  const headDim = headDimOf(shape);
  const half = headDim / 2;
  const invFreq = Array.from({ length: half }, (_, i) => ROPE_THETA ** (-(2 * i) / headDim));
  const group = shape.heads / shape.kvHeads;
  return [
    float('eps', [], [RMS_EPS]),
    float('scale', [], [1 / Math.sqrt(headDim)]),
    float('neg_big', [], [-3.4028234663852886e38]),
    float('zero_f', [], [0]),
    int64('ax_last', [1], [-1]),
    int64('ax_1', [1], [1]),
    int64('ax_0', [1], [0]),
    int64('ax_12', [2], [1, 2]),
    int64('i64_0', [], [0]),
    int64('i64_1', [], [1]),
    int64('i64_big', [1], [2 ** 31]),
    float('nan_f', [], [Number.NaN]),
    int64('shape_q', [4], [0, 0, shape.heads, headDim]),
    int64('shape_kv', [4], [0, 0, shape.kvHeads, headDim]),
    int64('shape_o', [3], [0, 0, shape.heads * headDim]),
    // rotate_half as a gather: [x2, x1] with the first half negated.
    float('inv_freq', [headDim], [...invFreq, ...invFreq]),
    int64(
      'rot_idx',
      [headDim],
      Array.from({ length: headDim }, (_, i) => (i + half) % headDim),
    ),
    float(
      'rot_sign',
      [headDim],
      Array.from({ length: headDim }, (_, i) => (i < half ? -1 : 1)),
    ),
    // Each KV head serves `group` query heads.
    int64(
      'kv_rep_idx',
      [shape.heads],
      Array.from({ length: shape.heads }, (_, i) => Math.floor(i / group)),
    ),
  ];
}

/** Rotary position tables and the additive causal + padding mask every layer shares. */
const preamble: NodeSpec[] = [
  { op: 'Gather', inputs: ['embed', 'input_ids'], outputs: ['embeds'], attributes: { axis: 0 } },
  { op: 'Cast', inputs: ['position_ids'], outputs: ['pos_f'], attributes: { to: DataType.FLOAT } },
  { op: 'Unsqueeze', inputs: ['pos_f', 'ax_last'], outputs: ['pos_u'] },
  { op: 'Mul', inputs: ['pos_u', 'inv_freq'], outputs: ['freqs'] },
  { op: 'Cos', inputs: ['freqs'], outputs: ['cos0'] },
  { op: 'Unsqueeze', inputs: ['cos0', 'ax_1'], outputs: ['cos'] },
  { op: 'Sin', inputs: ['freqs'], outputs: ['sin0'] },
  { op: 'Unsqueeze', inputs: ['sin0', 'ax_1'], outputs: ['sin'] },
  { op: 'Shape', inputs: ['attention_mask'], outputs: ['T1'], attributes: { start: 1, end: 2 } },
  { op: 'Shape', inputs: ['input_ids'], outputs: ['S1'], attributes: { start: 1, end: 2 } },
  { op: 'Squeeze', inputs: ['T1', 'ax_0'], outputs: ['T0'] },
  { op: 'Sub', inputs: ['T1', 'S1'], outputs: ['P1'] },
  { op: 'Squeeze', inputs: ['P1', 'ax_0'], outputs: ['P0'] },
  { op: 'Range', inputs: ['i64_0', 'T0', 'i64_1'], outputs: ['kidx0'] },
  { op: 'Unsqueeze', inputs: ['kidx0', 'ax_0'], outputs: ['kidx'] },
  { op: 'Range', inputs: ['P0', 'T0', 'i64_1'], outputs: ['qidx0'] },
  { op: 'Unsqueeze', inputs: ['qidx0', 'ax_1'], outputs: ['qidx'] },
  { op: 'LessOrEqual', inputs: ['kidx', 'qidx'], outputs: ['causal'] },
  { op: 'Cast', inputs: ['attention_mask'], outputs: ['am_b'], attributes: { to: DataType.BOOL } },
  { op: 'Unsqueeze', inputs: ['am_b', 'ax_12'], outputs: ['pad'] },
  { op: 'And', inputs: ['causal', 'pad'], outputs: ['allowed'] },
  { op: 'Where', inputs: ['allowed', 'zero_f', 'neg_big'], outputs: ['mask_bias'] },
];

function rmsNorm(prefix: string, input: string, weight: string): NodeSpec[] {
  return [
    { op: 'Mul', inputs: [input, input], outputs: [`${prefix}.sq`] },
    {
      op: 'ReduceMean',
      inputs: [`${prefix}.sq`],
      outputs: [`${prefix}.mean`],
      attributes: { axes: [-1], keepdims: 1 },
    },
    { op: 'Add', inputs: [`${prefix}.mean`, 'eps'], outputs: [`${prefix}.var`] },
    { op: 'Sqrt', inputs: [`${prefix}.var`], outputs: [`${prefix}.std`] },
    { op: 'Div', inputs: [input, `${prefix}.std`], outputs: [`${prefix}.norm`] },
    { op: 'Mul', inputs: [`${prefix}.norm`, weight], outputs: [`${prefix}.out`] },
  ];
}

function rotary(prefix: string, input: string): NodeSpec[] {
  return [
    { op: 'Gather', inputs: [input, 'rot_idx'], outputs: [`${prefix}.g`], attributes: { axis: 3 } },
    { op: 'Mul', inputs: [`${prefix}.g`, 'rot_sign'], outputs: [`${prefix}.rot`] },
    { op: 'Mul', inputs: [input, 'cos'], outputs: [`${prefix}.c`] },
    { op: 'Mul', inputs: [`${prefix}.rot`, 'sin'], outputs: [`${prefix}.s`] },
    { op: 'Add', inputs: [`${prefix}.c`, `${prefix}.s`], outputs: [`${prefix}.out`] },
  ];
}

/** One decoder layer: pre-norm GQA attention with rotary embeddings and a KV cache, then a pre-norm SwiGLU MLP. */
function layer(index: number, input: string): NodeSpec[] {
  const l = `l${index}`;
  const project = (name: string, weight: string, target: string): NodeSpec[] => [
    { op: 'MatMul', inputs: [`${l}.ln1n.out`, `${l}.${weight}`], outputs: [`${l}.${name}0`] },
    { op: 'Reshape', inputs: [`${l}.${name}0`, target], outputs: [`${l}.${name}1`] },
    { op: 'Transpose', inputs: [`${l}.${name}1`], outputs: [`${l}.${name}2`], attributes: { perm: [0, 2, 1, 3] } },
  ];
  return [
    ...rmsNorm(`${l}.ln1n`, input, `${l}.ln1`),
    ...project('q', 'wq', 'shape_q'),
    ...project('k', 'wk', 'shape_kv'),
    ...project('v', 'wv', 'shape_kv'),
    ...rotary(`${l}.qr`, `${l}.q2`),
    ...rotary(`${l}.kr`, `${l}.k2`),
    {
      op: 'Concat',
      inputs: [`past_key_values.${index}.key`, `${l}.kr.out`],
      outputs: [`present.${index}.key`],
      attributes: { axis: 2 },
    },
    {
      op: 'Concat',
      inputs: [`past_key_values.${index}.value`, `${l}.v2`],
      outputs: [`present.${index}.value`],
      attributes: { axis: 2 },
    },
    { op: 'Gather', inputs: [`present.${index}.key`, 'kv_rep_idx'], outputs: [`${l}.krep`], attributes: { axis: 1 } },
    { op: 'Gather', inputs: [`present.${index}.value`, 'kv_rep_idx'], outputs: [`${l}.vrep`], attributes: { axis: 1 } },
    { op: 'Transpose', inputs: [`${l}.krep`], outputs: [`${l}.kT`], attributes: { perm: [0, 1, 3, 2] } },
    { op: 'MatMul', inputs: [`${l}.qr.out`, `${l}.kT`], outputs: [`${l}.sc0`] },
    { op: 'Mul', inputs: [`${l}.sc0`, 'scale'], outputs: [`${l}.sc1`] },
    { op: 'Add', inputs: [`${l}.sc1`, 'mask_bias'], outputs: [`${l}.sc2`] },
    { op: 'Softmax', inputs: [`${l}.sc2`], outputs: [`${l}.probs`], attributes: { axis: -1 } },
    { op: 'MatMul', inputs: [`${l}.probs`, `${l}.vrep`], outputs: [`${l}.o0`] },
    { op: 'Transpose', inputs: [`${l}.o0`], outputs: [`${l}.o1`], attributes: { perm: [0, 2, 1, 3] } },
    { op: 'Reshape', inputs: [`${l}.o1`, 'shape_o'], outputs: [`${l}.o2`] },
    { op: 'MatMul', inputs: [`${l}.o2`, `${l}.wo`], outputs: [`${l}.o3`] },
    { op: 'Add', inputs: [input, `${l}.o3`], outputs: [`${l}.res1`] },
    ...rmsNorm(`${l}.ln2n`, `${l}.res1`, `${l}.ln2`),
    { op: 'MatMul', inputs: [`${l}.ln2n.out`, `${l}.wg`], outputs: [`${l}.g`] },
    { op: 'Sigmoid', inputs: [`${l}.g`], outputs: [`${l}.sig`] },
    { op: 'Mul', inputs: [`${l}.g`, `${l}.sig`], outputs: [`${l}.silu`] },
    { op: 'MatMul', inputs: [`${l}.ln2n.out`, `${l}.wu`], outputs: [`${l}.u`] },
    { op: 'Mul', inputs: [`${l}.silu`, `${l}.u`], outputs: [`${l}.act`] },
    { op: 'MatMul', inputs: [`${l}.act`, `${l}.wd`], outputs: [`${l}.d`] },
    { op: 'Add', inputs: [`${l}.res1`, `${l}.d`], outputs: [`${l}.res2`] },
  ];
}

/** The weights: uniform, scaled by 1/sqrt(fan-in) so activations stay O(1) through the residual stack. */
function weights(shape: LlamaShape): Initializer[] {
  const headDim = headDimOf(shape);
  const kv = shape.kvHeads * headDim;
  let stream = 0;
  // Each tensor draws from its own stream, so one tensor's size never shifts another's values.
  const matrix = (name: string, rows: number, cols: number) =>
    float(name, [rows, cols], uniform(rows * cols, 1 / Math.sqrt(rows), shape.seed * 7919 + (stream += 1)));
  const ones = (name: string) => float(name, [shape.hidden], new Float32Array(shape.hidden).fill(1));
  // The output projection is the embedding (tied, as in the bundled model). The EOS row is zero, so its logit is 0
  // while the largest of the others is positive: greedy decoding runs to max_tokens (like benchmarks' ignore_eos).
  const embed = float('embed', [shape.vocab, shape.hidden], uniform(shape.vocab * shape.hidden, 0.1, shape.seed));
  (embed.values as Float32Array).fill(0, EOS_TOKEN_ID * shape.hidden, (EOS_TOKEN_ID + 1) * shape.hidden);
  const all = [embed, ones('final_ln')];
  for (let index = 0; index < shape.layers; index += 1) {
    const l = `l${index}`;
    all.push(
      matrix(`${l}.wq`, shape.hidden, shape.heads * headDim),
      matrix(`${l}.wk`, shape.hidden, kv),
      matrix(`${l}.wv`, shape.hidden, kv),
      matrix(`${l}.wo`, shape.heads * headDim, shape.hidden),
      matrix(`${l}.wg`, shape.hidden, shape.intermediate),
      matrix(`${l}.wu`, shape.hidden, shape.intermediate),
      matrix(`${l}.wd`, shape.intermediate, shape.hidden),
      ones(`${l}.ln1`),
      ones(`${l}.ln2`),
    );
  }
  return all;
}

/** The inputs and outputs of a transformers.js decoder export with a KV cache, for `layers` layers. */
export function llamaSignature(
  shape: Pick<LlamaShape, 'layers' | 'kvHeads' | 'hidden' | 'heads' | 'vocab' | 'headDim'>,
  layout: LlamaLayout = {},
): {
  inputs: ValueInfo[];
  outputs: ValueInfo[];
} {
  const headDim = headDimOf(shape);
  const kv = (name: string, length: string): ValueInfo => ({
    name,
    type: layout.kvDtype === 'float16' ? DataType.FLOAT16 : DataType.FLOAT,
    shape: ['batch_size', shape.kvHeads, length, headDim],
  });
  const inputs: ValueInfo[] = [
    { name: 'input_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
    { name: 'attention_mask', type: DataType.INT64, shape: ['batch_size', 'total_sequence_length'] },
  ];
  if (layout.positionIds ?? true) {
    inputs.push({ name: 'position_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] });
  }
  const outputs: ValueInfo[] = [
    {
      name: 'logits',
      type: layout.kvDtype === 'float16' ? DataType.FLOAT16 : DataType.FLOAT,
      shape: ['batch_size', 'sequence_length', shape.vocab],
    },
  ];
  for (let index = 0; index < (layout.kvCache === false ? 0 : shape.layers); index += 1) {
    for (const part of ['key', 'value']) {
      inputs.push(kv(`past_key_values.${index}.${part}`, 'past_sequence_length'));
      outputs.push(kv(`present.${index}.${part}`, 'total_sequence_length'));
    }
  }
  if (layout.useCacheBranch ?? false) inputs.push({ name: 'use_cache_branch', type: DataType.BOOL, shape: [1] });
  return { inputs, outputs };
}

/** Derives `position_ids` from the mask, as exports without that input do: each token's count of real tokens - 1. */
const derivedPositions: NodeSpec[] = [
  { op: 'CumSum', inputs: ['attention_mask', 'i64_1'], outputs: ['mask_sum'] },
  { op: 'Sub', inputs: ['mask_sum', 'i64_1'], outputs: ['pos_all'] },
  { op: 'Shape', inputs: ['input_ids'], outputs: ['S1_pos'], attributes: { start: 1, end: 2 } },
  { op: 'Neg', inputs: ['S1_pos'], outputs: ['pos_start'] },
  { op: 'Slice', inputs: ['pos_all', 'pos_start', 'i64_big', 'ax_1'], outputs: ['position_ids'] },
];

/** NaN logits unless `use_cache_branch` says whether a past was given (P0 > 0). */
const cacheBranchCheck: NodeSpec[] = [
  { op: 'Greater', inputs: ['P0', 'i64_0'], outputs: ['has_past'] },
  { op: 'Equal', inputs: ['use_cache_branch', 'has_past'], outputs: ['branch_ok'] },
  { op: 'Where', inputs: ['branch_ok', 'zero_f', 'nan_f'], outputs: ['branch_bias'] },
  { op: 'Add', inputs: ['logits_raw', 'branch_bias'], outputs: ['logits'] },
];

/** The `config.json` of a shape: a LlamaForCausalLM as transformers writes it, plus what generated it. */
export function llamaConfig(shape: LlamaShape): Record<string, unknown> {
  return {
    architectures: ['LlamaForCausalLM'],
    attention_bias: false,
    bos_token_id: 1,
    eos_token_id: EOS_TOKEN_ID,
    head_dim: headDimOf(shape),
    hidden_act: 'silu',
    hidden_size: shape.hidden,
    intermediate_size: shape.intermediate,
    max_position_embeddings: shape.positions,
    mlp_bias: false,
    model_type: 'llama',
    num_attention_heads: shape.heads,
    num_hidden_layers: shape.layers,
    num_key_value_heads: shape.kvHeads,
    rms_norm_eps: RMS_EPS,
    rope_scaling: null,
    rope_theta: ROPE_THETA,
    tie_word_embeddings: true,
    torch_dtype: 'float32',
    use_cache: true,
    vocab_size: shape.vocab,
    microbatch_dummy_weights: { seed: shape.seed, parameters: llamaParameters(shape) },
  };
}

/**
 * How a generated decoder is laid out, reproducing the variants of real exports.
 *
 * @example
 * ```ts
 * await writeLlamaModel(dir, shape, tokenizerDir, { graph: 'decoder_model_merged', useCacheBranch: true });
 * ```
 */
export interface LlamaLayout {
  /**
   * The graph's name in `onnx/`: `model` (transformers.js v3+ exports) or `decoder_model_merged` (older exports).
   * @default 'model'
   */
  readonly graph?: string;
  /**
   * Keep the weights in `onnx/<graph>.onnx_data` beside the graph (exports past 2 GB).
   * @default false
   */
  readonly externalData?: boolean;
  /**
   * A merged decoder's `use_cache_branch` input (bool `[1]`): the logits are NaN unless it is true exactly when a
   * past is given, so a caller that feeds it wrong sees it at once.
   * @default false
   */
  readonly useCacheBranch?: boolean;
  /**
   * Take `position_ids` as an input; without, the graph derives them from `attention_mask` (cumulative sum - 1).
   * @default true
   */
  readonly positionIds?: boolean;
  /**
   * `'q8'`: the weight matrices quantized as onnxruntime's `quantize_dynamic` (transformers.js's `model_quantized.onnx`)
   * does: int8 weights with a per-tensor scale, each MatMul a DynamicQuantizeLinear + MatMulInteger + rescale. The
   * graph's name gets the dtype's suffix (`model_quantized.onnx`). `'int8'`: the same, named `model_int8.onnx`.
   * `'uint8'`: uint8 weights with a per-tensor scale and zero point (asymmetric, `quantize_dynamic`'s QUInt8),
   * `model_uint8.onnx`. `'q4'`: 4-bit blocks of 32 with a scale each (onnxruntime's MatMulNBits, as transformers.js's
   * `model_q4.onnx`; `model_q4f16.onnx` with `kvDtype: 'float16'`). `'bnb4'`: NF4 codes in blocks of 64 with an
   * absmax each (onnxruntime's MatMulBnb4, as `matmul_bnb4_quantizer` writes `model_bnb4.onnx`).
   */
  readonly quantize?: 'q8' | 'int8' | 'uint8' | 'q4' | 'bnb4';
  /**
   * `'float16'`: the embedding and weight matrices stored as float16 initializers (an fp16 export's file size), each
   * cast to float where the graph starts, so the arithmetic is the float32 graph's. With `kvDtype: 'float16'` this is
   * the layout of `model_fp16.onnx`.
   * @default 'float32'
   */
  readonly weights?: 'float32' | 'float16';
  /**
   * `'gpt2'`: `config.json` as a GPT-2 export writes it (`model_type: 'gpt2'`, `n_head`, `n_embd`, `n_layer`,
   * `n_positions`; no KV-head count, so `kvHeads` must equal `heads`), over the same Llama-shaped graph: what a
   * loader reads from a GPT-2 folder's config, not GPT-2's attention math. `'gemma'`: Llama's names under
   * `model_type: 'gemma'` (whose `head_dim` need not be `hidden / heads`: give the shape a `headDim`).
   * @default 'llama'
   */
  readonly config?: 'llama' | 'gpt2' | 'gemma';
  /**
   * The KV cache's and the logits' element type in the graph's inputs and outputs: `'float16'` as fp16 exports have
   * (cast to float inside, so the arithmetic is the float32 graph's).
   * @default 'float32'
   */
  readonly kvDtype?: 'float32' | 'float16';
  /**
   * `false`: no KV cache, as exports made without `--with-past` (`past_key_values.*` / `present.*` are neither
   * inputs nor outputs: each call attends over the tokens it is given, so every step recomputes the sequence).
   * @default true
   */
  readonly kvCache?: boolean;
}

/** A graph without a KV cache: each layer's keys and values are its own tokens' (the past concat dropped). */
function withoutKvCache(nodes: readonly NodeSpec[]): NodeSpec[] {
  return nodes.map((node) =>
    node.op === 'Concat' && node.inputs[0]?.startsWith('past_key_values.') === true
      ? { op: 'Identity', inputs: [node.inputs[1] as string], outputs: node.outputs }
      : node,
  );
}

/**
 * Makes the KV inputs and outputs and the logits float16, as an fp16 export's are: casts each past input to float on
 * entry, each present and the logits on exit.
 */
function halfKv(nodes: readonly NodeSpec[]): NodeSpec[] {
  const kv = /^(past_key_values\.\d+\.(key|value)|present\.\d+\.(key|value)|logits)$/;
  const inner = (name: string) => (kv.test(name) ? `${name}.f32` : name);
  const names = new Set(nodes.flatMap((node) => [...node.inputs, ...node.outputs]).filter((name) => kv.test(name)));
  const past = [...names].filter((name) => name.startsWith('past_key_values.'));
  const present = [...names].filter((name) => name.startsWith('present.') || name === 'logits');
  return [
    ...past.map((name) => ({ op: 'Cast', inputs: [name], outputs: [inner(name)], attributes: { to: DataType.FLOAT } })),
    ...nodes.map((node) => ({ ...node, inputs: node.inputs.map(inner), outputs: node.outputs.map(inner) })),
    ...present.map((name) => ({
      op: 'Cast',
      inputs: [inner(name)],
      outputs: [name],
      attributes: { to: DataType.FLOAT16 },
    })),
  ];
}

/** A GPT-2 export's `config.json` for a shape (whose KV heads are its heads). */
function gpt2Config(shape: LlamaShape): Record<string, unknown> {
  if (shape.kvHeads !== shape.heads) {
    throw new TypeError(
      `Expected \`kvHeads\` (${shape.kvHeads}) to equal \`heads\` (${shape.heads}): GPT-2's config has no KV-head count`,
    );
  }
  return {
    architectures: ['GPT2LMHeadModel'],
    model_type: 'gpt2',
    bos_token_id: 1,
    eos_token_id: EOS_TOKEN_ID,
    n_embd: shape.hidden,
    n_head: shape.heads,
    n_inner: shape.intermediate,
    n_layer: shape.layers,
    n_positions: shape.positions,
    vocab_size: shape.vocab,
    use_cache: true,
    microbatch_dummy_weights: { seed: shape.seed, parameters: llamaParameters(shape) },
  };
}

/**
 * Quantizes every MatMul whose right operand is a weight matrix (`l<i>.w*`) to int8, as `quantize_dynamic` does:
 * the activation per call (DynamicQuantizeLinear: uint8, scale, zero point), the weight once (symmetric int8 in 7
 * bits, a per-tensor scale), the product in int32 (MatMulInteger), then scaled back to float.
 */
function quantizeMatMuls(
  nodes: readonly NodeSpec[],
  initializers: readonly Initializer[],
  weightType: 'int8' | 'uint8' = 'int8',
): {
  nodes: NodeSpec[];
  initializers: Initializer[];
} {
  const weight = /^l\d+\.w[a-z]$/;
  const out: Initializer[] = [];
  for (const init of initializers) {
    if (!weight.test(init.name)) {
      out.push(init);
      continue;
    }
    const values = init.values as Float32Array;
    if (weightType === 'uint8') {
      // Asymmetric: [min, max] (holding 0) onto 0..255, 0 at the zero point.
      const low = Math.min(0, ...values);
      const high = Math.max(0, ...values);
      const scale = (high - low) / 255 || 1;
      const zero = Math.max(0, Math.min(255, Math.round(-low / scale)));
      out.push(
        {
          name: `${init.name}_q`,
          type: DataType.UINT8,
          dims: init.dims,
          values: Uint8Array.from(values, (value) => Math.max(0, Math.min(255, Math.round(value / scale) + zero))),
        },
        float(`${init.name}_s`, [], [scale]),
        { name: `${init.name}_zp`, type: DataType.UINT8, dims: [], values: [zero] },
      );
      continue;
    }
    // 7 bits, as `quantize_dynamic(reduce_range=True)` writes them: onnxruntime's uint8 x int8 kernel on a CPU with
    // AVX2 but no VNNI adds pairs of products in 16 bits, which 8-bit weights can saturate (then the answer depends on
    // the call's shape, and a row's greedy tokens on what shares its call); 7-bit ones cannot.
    const scale = values.reduce((max, value) => Math.max(max, Math.abs(value)), 0) / 63 || 1;
    out.push(
      {
        name: `${init.name}_q`,
        type: DataType.INT8,
        dims: init.dims,
        values: Int8Array.from(values, (value) => Math.max(-63, Math.min(63, Math.round(value / scale)))),
      },
      float(`${init.name}_s`, [], [scale]),
      { name: `${init.name}_zp`, type: DataType.INT8, dims: [], values: [0] },
    );
  }
  const quantized = nodes.flatMap((node): NodeSpec[] => {
    const [input, matrix] = node.inputs;
    const [output] = node.outputs;
    if (node.op !== 'MatMul' || matrix === undefined || !weight.test(matrix) || input === undefined) return [node];
    const q = `${output}.q`;
    return [
      { op: 'DynamicQuantizeLinear', inputs: [input], outputs: [`${q}.x`, `${q}.xs`, `${q}.xzp`] },
      { op: 'MatMulInteger', inputs: [`${q}.x`, `${matrix}_q`, `${q}.xzp`, `${matrix}_zp`], outputs: [`${q}.i`] },
      { op: 'Cast', inputs: [`${q}.i`], outputs: [`${q}.f`], attributes: { to: DataType.FLOAT } },
      { op: 'Mul', inputs: [`${q}.xs`, `${matrix}_s`], outputs: [`${q}.s`] },
      { op: 'Mul', inputs: [`${q}.f`, `${q}.s`], outputs: [output as string] },
    ];
  });
  return { nodes: quantized, initializers: out };
}

/** MatMulNBits' block: 32 weights of one output column share a scale. */
const Q4_BLOCK = 32;

/**
 * Quantizes every weight-matrix MatMul to 4 bits as onnxruntime's MatMulNBits takes them: per output column, blocks
 * of 32 along K, each with a float scale and the default zero point 8; two weights a byte, the first in the low nibble.
 */
function quantize4Bit(
  nodes: readonly NodeSpec[],
  initializers: readonly Initializer[],
): {
  nodes: NodeSpec[];
  initializers: Initializer[];
} {
  const weight = /^l\d+\.w[a-z]$/;
  const shapes = new Map<string, readonly number[]>();
  const out: Initializer[] = [];
  for (const init of initializers) {
    if (!weight.test(init.name)) {
      out.push(init);
      continue;
    }
    const [k = 0, n = 0] = init.dims;
    shapes.set(init.name, init.dims);
    const values = init.values as Float32Array;
    const blocks = Math.ceil(k / Q4_BLOCK);
    const packed = new Uint8Array(n * blocks * (Q4_BLOCK / 2));
    const scales = new Float32Array(n * blocks);
    for (let column = 0; column < n; column += 1) {
      for (let block = 0; block < blocks; block += 1) {
        const at = (i: number) => {
          const row = block * Q4_BLOCK + i;
          return row < k ? (values[row * n + column] as number) : 0;
        };
        let max = 0;
        for (let i = 0; i < Q4_BLOCK; i += 1) max = Math.max(max, Math.abs(at(i)));
        const scale = max / 7 || 1;
        scales[column * blocks + block] = scale;
        for (let i = 0; i < Q4_BLOCK; i += 2) {
          const q = (value: number) => Math.max(0, Math.min(15, Math.round(value / scale) + 8));
          packed[(column * blocks + block) * (Q4_BLOCK / 2) + i / 2] = q(at(i)) | (q(at(i + 1)) << 4);
        }
      }
    }
    out.push(
      { name: `${init.name}_q4`, type: DataType.UINT8, dims: [n, blocks, Q4_BLOCK / 2], values: packed },
      float(`${init.name}_scales`, [n * blocks], scales),
    );
  }
  const quantized = nodes.map((node): NodeSpec => {
    const [input, matrix] = node.inputs;
    const dims = matrix === undefined ? undefined : shapes.get(matrix);
    if (node.op !== 'MatMul' || dims === undefined || input === undefined) return node;
    return {
      op: 'MatMulNBits',
      domain: 'com.microsoft',
      inputs: [input, `${matrix}_q4`, `${matrix}_scales`],
      outputs: node.outputs,
      attributes: { K: dims[0] as number, N: dims[1] as number, bits: 4, block_size: Q4_BLOCK },
    };
  });
  return { nodes: quantized, initializers: out };
}

/** bitsandbytes' NF4 code book: the 16 values a 4-bit code stands for, times its block's absmax. */
const NF4 = [
  -1, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1,
];
/** MatMulBnb4's block: 64 consecutive weights of the transposed matrix share an absmax. */
const BNB4_BLOCK = 64;

/**
 * Quantizes every weight-matrix MatMul to NF4 as onnxruntime's MatMulBnb4 takes them: the matrix transposed
 * (`[N, K]`, flattened), blocks of 64 with their absolute maximum, each weight the nearest NF4 code of its value over
 * that maximum, two codes a byte, the first in the high nibble.
 */
function quantizeBnb4(
  nodes: readonly NodeSpec[],
  initializers: readonly Initializer[],
): { nodes: NodeSpec[]; initializers: Initializer[] } {
  const weight = /^l\d+\.w[a-z]$/;
  const shapes = new Map<string, readonly number[]>();
  const out: Initializer[] = [];
  for (const init of initializers) {
    if (!weight.test(init.name)) {
      out.push(init);
      continue;
    }
    const [k = 0, n = 0] = init.dims;
    shapes.set(init.name, init.dims);
    const values = init.values as Float32Array;
    const transposed = new Float32Array(n * k);
    for (let row = 0; row < k; row += 1) {
      for (let column = 0; column < n; column += 1) transposed[column * k + row] = values[row * n + column] as number;
    }
    const absmax = new Float32Array(Math.ceil((n * k) / BNB4_BLOCK));
    transposed.forEach((value, i) => {
      const block = Math.floor(i / BNB4_BLOCK);
      absmax[block] = Math.max(absmax[block] as number, Math.abs(value));
    });
    const packed = new Uint8Array(Math.ceil((n * k) / 2));
    transposed.forEach((value, i) => {
      const scaled = value / ((absmax[Math.floor(i / BNB4_BLOCK)] as number) || 1);
      let code = 0;
      for (let c = 1; c < NF4.length; c += 1) {
        if (Math.abs((NF4[c] as number) - scaled) < Math.abs((NF4[code] as number) - scaled)) code = c;
      }
      packed[i >> 1] = (packed[i >> 1] as number) | (i % 2 === 0 ? code << 4 : code);
    });
    out.push(
      { name: `${init.name}_bnb4`, type: DataType.UINT8, dims: [packed.length], values: packed },
      float(`${init.name}_absmax`, [absmax.length], absmax),
    );
  }
  const quantized = nodes.map((node): NodeSpec => {
    const [input, matrix] = node.inputs;
    const dims = matrix === undefined ? undefined : shapes.get(matrix);
    if (node.op !== 'MatMul' || dims === undefined || input === undefined) return node;
    return {
      op: 'MatMulBnb4',
      domain: 'com.microsoft',
      inputs: [input, `${matrix}_bnb4`, `${matrix}_absmax`],
      outputs: node.outputs,
      // quant_type 1: NF4 (0 is FP4).
      attributes: { K: dims[0] as number, N: dims[1] as number, block_size: BNB4_BLOCK, quant_type: 1 },
    };
  });
  return { nodes: quantized, initializers: out };
}

/** Stores the embedding and weight matrices as float16, each cast back to float where the graph starts. */
function halfWeights(
  nodes: readonly NodeSpec[],
  initializers: readonly Initializer[],
): { nodes: NodeSpec[]; initializers: Initializer[] } {
  const matrix = /^(embed|l\d+\.w[a-z])$/;
  const casts: NodeSpec[] = [];
  const out = initializers.map((init): Initializer => {
    if (!matrix.test(init.name)) return init;
    casts.push({ op: 'Cast', inputs: [`${init.name}.f16`], outputs: [init.name], attributes: { to: DataType.FLOAT } });
    return { ...init, name: `${init.name}.f16`, type: DataType.FLOAT16 };
  });
  return { nodes: [...casts, ...nodes], initializers: out };
}

/** What {@link writeLlamaModel} did. */
export interface WrittenLlama {
  readonly dir: string;
  readonly parameters: number;
  /** The graph file's size in bytes (`onnx/model.onnx` by default). */
  readonly bytes: number;
  /** False when the folder already held this shape (nothing was written). */
  readonly written: boolean;
}

/**
 * Writes a Llama-shaped decoder in transformers.js layout into `dir`: `onnx/model.onnx`, `config.json` and the
 * tokenizer files of `tokenizerDir` (whose vocabulary must have `shape.vocab` ids). Skips a folder whose
 * `config.json` already describes this shape; `config.json` is written last, so an interrupted run is redone.
 *
 * @example
 * ```ts
 * await writeLlamaModel('models/bench/llama-30m', shape, 'models/tinystories-656k');
 * ```
 */
export async function writeLlamaModel(
  dir: string,
  shape: LlamaShape,
  tokenizerDir: string,
  layout: LlamaLayout = {},
): Promise<WrittenLlama> {
  checkShape(shape);
  const graph = layout.graph ?? 'model';
  const config =
    layout.config === 'gpt2'
      ? gpt2Config(shape)
      : layout.config === 'gemma'
        ? { ...llamaConfig(shape), architectures: ['GemmaForCausalLM'], model_type: 'gemma' }
        : llamaConfig(shape);
  // A folder written with another layout is written again.
  if (Object.keys(layout).length > 0) config.microbatch_dummy_layout = layout;
  const text = `${JSON.stringify(config, null, 2)}\n`;
  const parameters = llamaParameters(shape);
  const existing = await readFile(join(dir, 'config.json'), 'utf8').catch(() => undefined);
  // The dtype's suffix, as transformers.js names the file: q8 weights, or an fp16 export's float16 KV cache.
  const half = layout.kvDtype === 'float16';
  const suffix =
    layout.quantize === 'q8'
      ? '_quantized'
      : layout.quantize === 'int8' || layout.quantize === 'uint8' || layout.quantize === 'bnb4'
        ? `_${layout.quantize}`
        : layout.quantize === 'q4'
          ? half
            ? '_q4f16'
            : '_q4'
          : half
            ? '_fp16'
            : '';
  const modelPath = join(dir, 'onnx', `${graph}${suffix}.onnx`);
  const size = await stat(modelPath).then(
    (info) => info.size,
    () => undefined,
  );
  if (existing === text && size !== undefined) return { dir, parameters, bytes: size, written: false };
  await mkdir(join(dir, 'onnx'), { recursive: true });
  const branch = layout.useCacheBranch ?? false;
  const nodes: NodeSpec[] = [...((layout.positionIds ?? true) ? [] : derivedPositions), ...preamble];
  let hidden = 'embeds';
  for (let index = 0; index < shape.layers; index += 1) {
    nodes.push(...layer(index, hidden));
    hidden = `l${index}.res2`;
  }
  nodes.push(
    ...rmsNorm('final_norm', hidden, 'final_ln'),
    { op: 'Transpose', inputs: ['embed'], outputs: ['lm_head_T'], attributes: { perm: [1, 0] } },
    { op: 'MatMul', inputs: ['final_norm.out', 'lm_head_T'], outputs: [branch ? 'logits_raw' : 'logits'] },
    ...(branch ? cacheBranchCheck : []),
  );
  const plain = {
    nodes: layout.kvDtype === 'float16' ? halfKv(nodes) : layout.kvCache === false ? withoutKvCache(nodes) : nodes,
    initializers: [...constants(shape), ...weights(shape)],
  };
  const { quantize } = layout;
  const bytes = await writeModel(modelPath, {
    ...llamaSignature(shape, layout),
    ...(quantize === 'q8' || quantize === 'int8'
      ? quantizeMatMuls(plain.nodes, plain.initializers)
      : quantize === 'uint8'
        ? quantizeMatMuls(plain.nodes, plain.initializers, 'uint8')
        : quantize === 'q4'
          ? quantize4Bit(plain.nodes, plain.initializers)
          : quantize === 'bnb4'
            ? quantizeBnb4(plain.nodes, plain.initializers)
            : layout.weights === 'float16'
              ? halfWeights(plain.nodes, plain.initializers)
              : plain),
    ...(layout.externalData === true ? { externalData: `${graph}${suffix}.onnx_data` } : {}),
    producer: 'microbatch-dummy-llama',
    graphName: 'llama',
  });
  for (const file of ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'generation_config.json']) {
    await copyFile(join(tokenizerDir, file), join(dir, file));
  }
  const partial = join(dir, `config.json.${process.pid}.partial`);
  await writeFile(partial, text);
  await rename(partial, join(dir, 'config.json'));
  return { dir, parameters, bytes, written: true };
}
