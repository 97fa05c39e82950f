// A BERT-shaped encoder in transformers.js layout, for embedding tests and benchmarks: the real all-MiniLM-L6-v2
// tokenizer (../shared/models/minilm-tokenizer) with small random weights. The graph has what makes batching an
// encoder non-trivial: word + segment + position embeddings, one masked self-attention layer (padding must not be
// attended to) and a feed-forward layer; inputs `input_ids`, `attention_mask`, `token_type_ids`, output
// `last_hidden_state [batch, sequence, hidden]`, as Xenova's sentence-transformers exports have.
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataType, encodeModel } from '@microbatch/test-kit';
import type { Initializer } from '@microbatch/test-kit';

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
   * A sequence-classification head instead of `last_hidden_state`: BERT's pooler (`[CLS]`, dense, tanh) and a
   * classifier, output `logits [batch, labels]`, the labels written as `id2label` (one label: a cross-encoder).
   * No sentence-transformers files are written then.
   */
  readonly labels?: readonly string[];
  /** `problem_type` of `config.json` (`'multi_label_classification'`: sigmoid per label). */
  readonly problemType?: string;
}

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
}

function encoder(
  hidden: number,
  intermediate: number,
  seed: number,
  tokenTypeIds: boolean,
  labels: number | undefined,
): Uint8Array {
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
  return encodeModel({
    inputs: [
      { name: 'input_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
      { name: 'attention_mask', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
      ...(tokenTypeIds
        ? [{ name: 'token_type_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] }]
        : []),
    ],
    outputs: [
      labels === undefined
        ? { name: 'last_hidden_state', type: DataType.FLOAT, shape: ['batch_size', 'sequence_length', hidden] }
        : { name: 'logits', type: DataType.FLOAT, shape: ['batch_size', labels] },
    ],
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
      ...(labels === undefined
        ? []
        : [
            weights('w_pool', [hidden, hidden], 1 / Math.sqrt(hidden)),
            weights('w_cls', [hidden, labels], 2 / Math.sqrt(hidden)),
            weights('b_cls', [labels], 0.5),
          ]),
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
      { op: 'Add', inputs: ['x1', 'ffn'], outputs: [labels === undefined ? 'last_hidden_state' : 'hidden_states'] },
      // BERT's sequence-classification head: the first token (`[CLS]`), the pooler (dense + tanh), the classifier.
      ...(labels === undefined
        ? []
        : [
            { op: 'Gather', inputs: ['hidden_states', 'zero'], outputs: ['cls'], attributes: { axis: 1 } },
            { op: 'MatMul', inputs: ['cls', 'w_pool'], outputs: ['pool_pre'] },
            { op: 'Tanh', inputs: ['pool_pre'], outputs: ['pooled'] },
            { op: 'MatMul', inputs: ['pooled', 'w_cls'], outputs: ['scores_cls'] },
            { op: 'Add', inputs: ['scores_cls', 'b_cls'], outputs: ['logits'] },
          ]),
    ],
  });
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
          id2label: Object.fromEntries(labels.map((label, id) => [String(id), label])),
          label2id: Object.fromEntries(labels.map((label, id) => [label, id])),
          ...(options.problemType === undefined ? {} : { problem_type: options.problemType }),
        };
  await writeFile(
    join(dir, 'config.json'),
    JSON.stringify({ ...config, hidden_size: hidden, num_hidden_layers: 1, num_attention_heads: 1, ...head }),
  );
  await writeFile(
    join(dir, 'onnx', 'model.onnx'),
    encoder(
      hidden,
      options.intermediate ?? 4 * hidden,
      options.seed ?? 1,
      options.tokenTypeIds ?? true,
      labels?.length,
    ),
  );
  if (labels !== undefined) return dir;
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
