// The realistic encoders of `pnpm bench:models`: all-MiniLM-L6-v2's shape (6 layers, hidden 384, 12 heads, FFN 1536,
// vocabulary 30,522, 512 positions) with the real MiniLM WordPiece tokenizer (../shared/models/minilm-tokenizer) and
// made-up weights: a sentence-transformers embedder (mean pooling, normalised) and a cross-encoder of the same shape
// with BERT's classification head (one relevance logit), as ms-marco-MiniLM-L-6-v2 is. Per token they cost what the
// real ones cost (multi-head masked attention, GELU FFN, LayerNorm), so the benchmarks measure a real model's work.
import { copyFile, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '@microbatch/core/util';
import { DataType, encodeModel } from '@microbatch/test-kit';
import type { Initializer, NodeSpec } from '@microbatch/test-kit';

const TOKENIZER_DIR = fileURLToPath(new URL('../../../shared/models/minilm-tokenizer', import.meta.url));

/** The shape of all-MiniLM-L6-v2 (and ms-marco-MiniLM-L-6-v2). */
export const MINILM_SHAPE = {
  vocab: 30_522,
  positions: 512,
  hidden: 384,
  layers: 6,
  heads: 12,
  intermediate: 1536,
} as const;

/** Which of the two is written: the embedder (`last_hidden_state`) or the cross-encoder (`logits [batch, 1]`). */
export type MiniLmKind = 'embedder' | 'cross-encoder';

/** Where `pnpm bench:models` writes each (models/ is gitignored). */
export function miniLmDir(kind: MiniLmKind): string {
  return fileURLToPath(new URL(`../../models/bench/minilm-l6-${kind}`, import.meta.url));
}

function graph(kind: MiniLmKind, seed: number): Uint8Array {
  const { vocab, positions, hidden, layers, heads, intermediate } = MINILM_SHAPE;
  const head = hidden / heads;
  const random = seededRandom(seed);
  const initializers: Initializer[] = [];
  const matrix = (name: string, rows: number, cols: number, scale = 1 / Math.sqrt(rows)) => {
    initializers.push({
      name,
      type: DataType.FLOAT,
      dims: [rows, cols],
      values: Float32Array.from({ length: rows * cols }, () => (random() * 2 - 1) * scale),
    });
    return name;
  };
  const vector = (name: string, size: number, fill: number | 'random') => {
    initializers.push({
      name,
      type: DataType.FLOAT,
      dims: [size],
      values: Float32Array.from({ length: size }, () => (fill === 'random' ? (random() * 2 - 1) * 0.02 : fill)),
    });
    return name;
  };
  const ints = (name: string, values: number[], dims = [values.length]) => {
    initializers.push({ name, type: DataType.INT64, dims, values });
    return name;
  };
  const floats = (name: string, value: number) => {
    initializers.push({ name, type: DataType.FLOAT, dims: [], values: [value] });
    return name;
  };
  const nodes: NodeSpec[] = [];
  const node = (op: string, inputs: string[], output: string, attributes?: NodeSpec['attributes']) => {
    nodes.push({ op, inputs, outputs: [output], ...(attributes === undefined ? {} : { attributes }) });
    return output;
  };
  const dense = (x: string, name: string, rows: number, cols: number) =>
    node(
      'Add',
      [node('MatMul', [x, matrix(`${name}.w`, rows, cols)], `${name}.mm`), vector(`${name}.b`, cols, 'random')],
      name,
    );
  const layerNorm = (x: string, name: string) =>
    node('LayerNormalization', [x, vector(`${name}.g`, hidden, 1), vector(`${name}.beta`, hidden, 0)], name, {
      // epsilon: the operator's default (1e-5; the writer takes integer attributes only), BERT's is 1e-12.
      axis: -1,
    });

  ints('zero', [0], []);
  ints('one', [1], []);
  ints('axes_12', [1, 2]);
  ints('split_heads', [0, 0, heads, head]);
  ints('merge_heads', [0, 0, hidden]);
  floats('one_f', 1);
  floats('masked', 10_000);
  floats('scale', 1 / Math.sqrt(head));
  floats('half', 0.5);
  floats('sqrt2', Math.SQRT2);
  // Embeddings: word + segment + position, then LayerNorm.
  const words = node('Gather', [matrix('word_embeddings', vocab, hidden, 1), 'input_ids'], 'words', { axis: 0 });
  const types = node('Gather', [matrix('type_embeddings', 2, hidden, 0.1), 'token_type_ids'], 'types', { axis: 0 });
  const length = node('Gather', [node('Shape', ['input_ids'], 'shape'), 'one'], 'length', { axis: 0 });
  const placed = node(
    'Gather',
    [matrix('position_embeddings', positions, hidden, 0.1), node('Range', ['zero', length, 'one'], 'positions')],
    'placed',
    { axis: 0 },
  );
  let x = layerNorm(node('Add', [node('Add', [words, types], 'wt'), placed], 'embedded'), 'embeddings.ln');
  // The attention bias: 0 where attended, -10000 on padding, [batch, 1, 1, sequence].
  const mask = node('Cast', ['attention_mask'], 'mask_f', { to: DataType.FLOAT });
  const bias = node(
    'Unsqueeze',
    [node('Mul', [node('Sub', [mask, 'one_f'], 'mask_neg'), 'masked'], 'bias_2d'), 'axes_12'],
    'bias',
  );
  for (let l = 0; l < layers; l += 1) {
    const p = `l${l}`;
    const split = (t: string, perm: number[]) =>
      node('Transpose', [node('Reshape', [t, 'split_heads'], `${t}.heads`)], `${t}.t`, { perm });
    const q = split(dense(x, `${p}.q`, hidden, hidden), [0, 2, 1, 3]);
    const k = split(dense(x, `${p}.k`, hidden, hidden), [0, 2, 3, 1]);
    const v = split(dense(x, `${p}.v`, hidden, hidden), [0, 2, 1, 3]);
    const scores = node(
      'Add',
      [node('Mul', [node('MatMul', [q, k], `${p}.qk`), 'scale'], `${p}.scaled`), bias],
      `${p}.biased`,
    );
    const probs = node('Softmax', [scores], `${p}.probs`, { axis: -1 });
    const context = node(
      'Reshape',
      [
        node('Transpose', [node('MatMul', [probs, v], `${p}.ctx`)], `${p}.ctx.t`, { perm: [0, 2, 1, 3] }),
        'merge_heads',
      ],
      `${p}.ctx.m`,
    );
    const attended = layerNorm(node('Add', [x, dense(context, `${p}.o`, hidden, hidden)], `${p}.res1`), `${p}.ln1`);
    // GELU (erf form, as BERT's): 0.5 x (1 + erf(x / sqrt 2)).
    const up = dense(attended, `${p}.up`, hidden, intermediate);
    const erf = node('Erf', [node('Div', [up, 'sqrt2'], `${p}.up.s`)], `${p}.erf`);
    const gelu = node(
      'Mul',
      [node('Mul', [up, 'half'], `${p}.up.h`), node('Add', [erf, 'one_f'], `${p}.erf1`)],
      `${p}.gelu`,
    );
    x = layerNorm(node('Add', [attended, dense(gelu, `${p}.down`, intermediate, hidden)], `${p}.res2`), `${p}.ln2`);
  }
  let output: { name: string; shape: (string | number)[] };
  if (kind === 'embedder') {
    node('Identity', [x], 'last_hidden_state');
    output = { name: 'last_hidden_state', shape: ['batch_size', 'sequence_length', hidden] };
  } else {
    const cls = node('Gather', [x, 'zero'], 'cls', { axis: 1 });
    const pooled = node('Tanh', [dense(cls, 'pooler', hidden, hidden)], 'pooled');
    node('Identity', [dense(pooled, 'classifier', hidden, 1)], 'logits');
    output = { name: 'logits', shape: ['batch_size', 1] };
  }
  return encodeModel({
    inputs: ['input_ids', 'attention_mask', 'token_type_ids'].map((name) => ({
      name,
      type: DataType.INT64,
      shape: ['batch_size', 'sequence_length'],
    })),
    outputs: [{ name: output.name, type: DataType.FLOAT, shape: output.shape }],
    initializers,
    nodes,
  });
}

/**
 * Writes the MiniLM-shaped `kind` into its folder in transformers.js layout (config, tokenizer files,
 * `onnx/model.onnx`; sentence-transformers' pooling and normalisation for the embedder, `id2label` for the
 * cross-encoder) unless it is there already (same shape and seed: same bytes). Returns the folder and whether it
 * was written now.
 */
export async function ensureMiniLm(kind: MiniLmKind): Promise<{ dir: string; written: boolean; bytes: number }> {
  const dir = miniLmDir(kind);
  const file = join(dir, 'onnx', 'model.onnx');
  const existing = await stat(file).catch(() => undefined);
  if (existing !== undefined) return { dir, written: false, bytes: existing.size };
  await mkdir(join(dir, 'onnx'), { recursive: true });
  for (const name of ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.txt']) {
    await copyFile(join(TOKENIZER_DIR, name), join(dir, name));
  }
  const config = JSON.parse(await readFile(join(TOKENIZER_DIR, 'config.json'), 'utf8')) as Record<string, unknown>;
  const head =
    kind === 'cross-encoder'
      ? { architectures: ['BertForSequenceClassification'], id2label: { 0: 'LABEL_0' }, label2id: { LABEL_0: 0 } }
      : {};
  await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, ...head }, null, 2));
  if (kind === 'embedder') {
    await mkdir(join(dir, '1_Pooling'), { recursive: true });
    await writeFile(
      join(dir, '1_Pooling', 'config.json'),
      JSON.stringify({ word_embedding_dimension: MINILM_SHAPE.hidden, pooling_mode_mean_tokens: true }),
    );
    await writeFile(
      join(dir, 'modules.json'),
      JSON.stringify([
        { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
        { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
        { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' },
      ]),
    );
  }
  const bytes = graph(kind, kind === 'embedder' ? 61 : 62);
  await writeFile(file, bytes);
  return { dir, written: true, bytes: bytes.length };
}
