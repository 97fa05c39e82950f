// A BERT-shaped encoder in transformers.js layout, for embedding tests and benchmarks: the real all-MiniLM-L6-v2
// tokenizer (../shared/models/minilm-tokenizer) with small random weights. The graph has what makes batching an
// encoder non-trivial: word + segment + position embeddings, one masked self-attention layer (padding must not be
// attended to) and a feed-forward layer; inputs `input_ids`, `attention_mask`, `token_type_ids`, output
// `last_hidden_state [batch, sequence, hidden]`, as Xenova's sentence-transformers exports have.
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataType, encodeModel } from '@microbatch/test-kit';
import type { Initializer, ModelSpec, NodeSpec } from '@microbatch/test-kit';

/** The real WordPiece tokenizer and config of all-MiniLM-L6-v2, without weights. */
export const MINILM_TOKENIZER_DIR = fileURLToPath(
  new URL('../../../../../shared/models/minilm-tokenizer', import.meta.url),
);
const VOCAB = 30_522;
const POSITIONS = 512;

/** Shape of the generated encoder. */
export interface BertEncoderOptions {
  /** @default 32 */
  readonly hidden?: number;
  /** Feed-forward width. @default 4 * hidden */
  readonly intermediate?: number;
  /** sentence-transformers' pooling written to `1_Pooling/config.json`; none when absent. @default 'mean' */
  readonly pooling?: 'mean' | 'cls' | undefined;
  /** Whether `modules.json` lists a Normalize module. @default true */
  readonly normalize?: boolean;
  /** Seeds the weights. @default 1 */
  readonly seed?: number;
  /** Whether the graph takes `token_type_ids` (BERT) or not (DistilBERT-like exports). @default true */
  readonly tokenTypeIds?: boolean;
  /**
   * `'q8'`: the weight matrices quantized as onnxruntime's `quantize_dynamic` does (int8 weights with a per-tensor
   * scale, each MatMul a DynamicQuantizeLinear + MatMulInteger + rescale), written as `onnx/model_quantized.onnx`
   * (the only graph). @default none: `onnx/model.onnx`, float32
   */
  readonly quantize?: 'q8';
  /**
   * A sequence-classification export (`BertForSequenceClassification`): a linear head on the first word's state,
   * output `logits [batch, labels]`, and `config.json`'s `id2label` / `label2id` naming these labels.
   * @default none: a feature-extraction export (`last_hidden_state`)
   */
  readonly labels?: readonly string[];
  /** `problem_type` of `config.json` (`'multi_label_classification'`: sigmoid per label). @default 'single_label_classification' */
  readonly problemType?: string;
}

/**
 * Quantizes the MatMuls whose right operand is one of `weights` to int8, as `quantize_dynamic` does: the activation
 * per call (DynamicQuantizeLinear), the weight once (symmetric, a per-tensor scale), the product in int32.
 */
function quantizeMatMuls(spec: ModelSpec, weights: ReadonlySet<string>): ModelSpec {
  const initializers = spec.initializers.flatMap((init): Initializer[] => {
    if (!weights.has(init.name)) return [init];
    const values = Float32Array.from(init.values);
    const scale = values.reduce((max, value) => Math.max(max, Math.abs(value)), 0) / 127 || 1;
    return [
      {
        name: `${init.name}_q`,
        type: DataType.INT8,
        dims: init.dims,
        values: Int8Array.from(values, (value) => Math.max(-127, Math.min(127, Math.round(value / scale)))),
      },
      { name: `${init.name}_s`, type: DataType.FLOAT, dims: [], values: [scale] },
      { name: `${init.name}_zp`, type: DataType.INT8, dims: [], values: [0] },
    ];
  });
  const nodes = spec.nodes.flatMap((node): NodeSpec[] => {
    const [input, matrix] = node.inputs;
    const [output] = node.outputs;
    if (node.op !== 'MatMul' || input === undefined || matrix === undefined || !weights.has(matrix)) return [node];
    const q = `${output}.q`;
    return [
      { op: 'DynamicQuantizeLinear', inputs: [input], outputs: [`${q}.x`, `${q}.xs`, `${q}.xzp`] },
      { op: 'MatMulInteger', inputs: [`${q}.x`, `${matrix}_q`, `${q}.xzp`, `${matrix}_zp`], outputs: [`${q}.i`] },
      { op: 'Cast', inputs: [`${q}.i`], outputs: [`${q}.f`], attributes: { to: DataType.FLOAT } },
      { op: 'Mul', inputs: [`${q}.xs`, `${matrix}_s`], outputs: [`${q}.s`] },
      { op: 'Mul', inputs: [`${q}.f`, `${q}.s`], outputs: [output as string] },
    ];
  });
  return { ...spec, initializers, nodes };
}

/**
 * Replaces the `last_hidden_state` output by a classification head, `logits [batch, labels]`: BERT's reads the
 * `[CLS]` token's state; this made-up one reads the next token's (the first word's), so that with one random layer
 * different texts get different labels.
 */
function classifierHead(spec: ModelSpec, hidden: number, labels: number, seed: number): ModelSpec {
  const next = random(seed + 7);
  return {
    ...spec,
    outputs: [{ name: 'logits', type: DataType.FLOAT, shape: ['batch_size', labels] }],
    initializers: [
      ...spec.initializers,
      {
        name: 'classifier',
        type: DataType.FLOAT,
        dims: [hidden, labels],
        values: Float32Array.from({ length: hidden * labels }, () => next() * 2 - 1),
      },
      {
        name: 'classifier_bias',
        type: DataType.FLOAT,
        dims: [labels],
        values: [0.1, ...new Array(labels - 1).fill(0)],
      },
      { name: 'first_word', type: DataType.INT64, dims: [], values: [1] },
    ],
    nodes: [
      ...spec.nodes,
      { op: 'Gather', inputs: ['last_hidden_state', 'first_word'], outputs: ['pooled'], attributes: { axis: 1 } },
      { op: 'MatMul', inputs: ['pooled', 'classifier'], outputs: ['scored'] },
      { op: 'Add', inputs: ['scored', 'classifier_bias'], outputs: ['logits'] },
    ],
  };
}

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
}

function encoder(hidden: number, intermediate: number, seed: number, tokenTypeIds: boolean): ModelSpec {
  const next = random(seed);
  const weights = (name: string, dims: number[], scale: number): Initializer => ({
    name,
    type: DataType.FLOAT,
    dims,
    values: Float32Array.from({ length: dims.reduce((a, b) => a * b, 1) }, () => (next() * 2 - 1) * scale),
  });
  const scalar = (name: string, type: typeof DataType.FLOAT | typeof DataType.INT64, value: number): Initializer => ({
    name,
    type,
    dims: [],
    values: [value],
  });
  return {
    inputs: [
      { name: 'input_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
      { name: 'attention_mask', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
      ...(tokenTypeIds
        ? [{ name: 'token_type_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] }]
        : []),
    ],
    outputs: [{ name: 'last_hidden_state', type: DataType.FLOAT, shape: ['batch_size', 'sequence_length', hidden] }],
    initializers: [
      weights('word_embeddings', [VOCAB, hidden], 1),
      weights('token_type_embeddings', [2, hidden], 0.1),
      weights('position_embeddings', [POSITIONS, hidden], 0.1),
      weights('wq', [hidden, hidden], 1 / Math.sqrt(hidden)),
      weights('wk', [hidden, hidden], 1 / Math.sqrt(hidden)),
      weights('wv', [hidden, hidden], 1 / Math.sqrt(hidden)),
      weights('w1', [hidden, intermediate], 1 / Math.sqrt(hidden)),
      weights('w2', [intermediate, hidden], 1 / Math.sqrt(intermediate)),
      scalar('zero', DataType.INT64, 0),
      scalar('one', DataType.INT64, 1),
      scalar('one_f', DataType.FLOAT, 1),
      scalar('scale', DataType.FLOAT, 1 / Math.sqrt(hidden)),
      scalar('masked', DataType.FLOAT, 10_000),
      { name: 'axis_1', type: DataType.INT64, dims: [1], values: [1] },
    ],
    nodes: [
      { op: 'Gather', inputs: ['word_embeddings', 'input_ids'], outputs: ['words'], attributes: { axis: 0 } },
      ...(tokenTypeIds
        ? [
            {
              op: 'Gather',
              inputs: ['token_type_embeddings', 'token_type_ids'],
              outputs: ['types'],
              attributes: { axis: 0 },
            },
            { op: 'Add', inputs: ['words', 'types'], outputs: ['x_wt'] },
          ]
        : [{ op: 'Identity', inputs: ['words'], outputs: ['x_wt'] }]),
      { op: 'Shape', inputs: ['input_ids'], outputs: ['shape'] },
      { op: 'Gather', inputs: ['shape', 'one'], outputs: ['length'], attributes: { axis: 0 } },
      { op: 'Range', inputs: ['zero', 'length', 'one'], outputs: ['positions'] },
      { op: 'Gather', inputs: ['position_embeddings', 'positions'], outputs: ['placed'], attributes: { axis: 0 } },
      { op: 'Add', inputs: ['x_wt', 'placed'], outputs: ['x0'] },
      { op: 'MatMul', inputs: ['x0', 'wq'], outputs: ['q'] },
      { op: 'MatMul', inputs: ['x0', 'wk'], outputs: ['k'] },
      { op: 'MatMul', inputs: ['x0', 'wv'], outputs: ['v'] },
      { op: 'Transpose', inputs: ['k'], outputs: ['kt'], attributes: { perm: [0, 2, 1] } },
      { op: 'MatMul', inputs: ['q', 'kt'], outputs: ['scores'] },
      { op: 'Mul', inputs: ['scores', 'scale'], outputs: ['scaled'] },
      { op: 'Cast', inputs: ['attention_mask'], outputs: ['mask_f'], attributes: { to: DataType.FLOAT } },
      { op: 'Unsqueeze', inputs: ['mask_f', 'axis_1'], outputs: ['mask_3d'] },
      { op: 'Sub', inputs: ['mask_3d', 'one_f'], outputs: ['mask_neg'] },
      { op: 'Mul', inputs: ['mask_neg', 'masked'], outputs: ['bias'] },
      { op: 'Add', inputs: ['scaled', 'bias'], outputs: ['biased'] },
      { op: 'Softmax', inputs: ['biased'], outputs: ['probs'], attributes: { axis: -1 } },
      { op: 'MatMul', inputs: ['probs', 'v'], outputs: ['context'] },
      { op: 'Add', inputs: ['x0', 'context'], outputs: ['x1'] },
      { op: 'MatMul', inputs: ['x1', 'w1'], outputs: ['h_pre'] },
      { op: 'Tanh', inputs: ['h_pre'], outputs: ['h'] },
      { op: 'MatMul', inputs: ['h', 'w2'], outputs: ['ffn'] },
      { op: 'Add', inputs: ['x1', 'ffn'], outputs: ['last_hidden_state'] },
    ],
  };
}

/**
 * Writes the encoder into `dir` (transformers.js layout: config, tokenizer files, `onnx/model.onnx`, and
 * sentence-transformers' `1_Pooling/config.json` and `modules.json`); returns `dir`.
 *
 * @example
 * ```ts
 * const model = await writeBertEncoder(join(tmp, 'tiny-minilm'), { hidden: 32 });
 * ```
 */
export async function writeBertEncoder(dir: string, options: BertEncoderOptions = {}): Promise<string> {
  const hidden = options.hidden ?? 32;
  const pooling = 'pooling' in options ? options.pooling : 'mean';
  await mkdir(join(dir, 'onnx'), { recursive: true });
  for (const file of ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.txt']) {
    await copyFile(join(MINILM_TOKENIZER_DIR, file), join(dir, file));
  }
  const config = JSON.parse(await readFile(join(MINILM_TOKENIZER_DIR, 'config.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  const { labels } = options;
  const head =
    labels === undefined
      ? {}
      : {
          architectures: ['BertForSequenceClassification'],
          id2label: Object.fromEntries(labels.map((label, index) => [String(index), label])),
          label2id: Object.fromEntries(labels.map((label, index) => [label, index])),
          problem_type: options.problemType ?? 'single_label_classification',
        };
  await writeFile(
    join(dir, 'config.json'),
    JSON.stringify({ ...config, ...head, hidden_size: hidden, num_hidden_layers: 1, num_attention_heads: 1 }),
  );
  const seed = options.seed ?? 1;
  let graph = encoder(hidden, options.intermediate ?? 4 * hidden, seed, options.tokenTypeIds ?? true);
  if (labels !== undefined) graph = classifierHead(graph, hidden, labels.length, seed);
  if (options.quantize === 'q8') graph = quantizeMatMuls(graph, new Set(['wq', 'wk', 'wv', 'w1', 'w2']));
  await writeFile(
    join(dir, 'onnx', options.quantize === 'q8' ? 'model_quantized.onnx' : 'model.onnx'),
    encodeModel(graph),
  );
  const modules = [{ idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' }];
  if (pooling !== undefined) {
    await mkdir(join(dir, '1_Pooling'), { recursive: true });
    await writeFile(
      join(dir, '1_Pooling', 'config.json'),
      JSON.stringify({
        word_embedding_dimension: hidden,
        pooling_mode_cls_token: pooling === 'cls',
        pooling_mode_mean_tokens: pooling === 'mean',
        pooling_mode_max_tokens: false,
        pooling_mode_mean_sqrt_len_tokens: false,
      }),
    );
    modules.push({ idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' });
  }
  if (options.normalize ?? true) {
    modules.push({ idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' });
  }
  await writeFile(join(dir, 'modules.json'), JSON.stringify(modules));
  return dir;
}
