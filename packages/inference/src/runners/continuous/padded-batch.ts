// The KV cache of the running batch, merged by left padding (TGI's padded recipe): every row's past is aligned
// to the right of a shared length `past`; a row with fewer tokens has zeros on its left, masked out by
// `attention_mask`, and its position ids count only its real tokens. A source's arrays may be longer than its rows
// need (the reused buffers of `kv-group.ts`): a row's data is found from its index and the source's `past`, and
// inputs are views of the arrays' leading part.
import { Tensor } from 'onnxruntime-node';

/** What the loop needs to know about the model's inputs and outputs. */
export interface ModelGeometry {
  /** `past_key_values.{i}.{key,value}`, in a fixed order. */
  readonly pastNames: readonly string[];
  /** `present.{i}.{key,value}`, in the same order. */
  readonly presentNames: readonly string[];
  readonly kvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  readonly padTokenId: number;
  /** Whether the model takes `position_ids` (it derives them itself otherwise). */
  readonly positionIds: boolean;
  /**
   * Whether the model is a merged decoder (`decoder_model_merged.onnx`) with a `use_cache_branch` input: true when a
   * past is fed, false on a prefill without one.
   */
  readonly useCacheBranch?: boolean;
  /**
   * The KV cache's element type in the graph (fp16 exports: `'float16'`). The loop keeps and copies the cache in
   * that type, never converting it: a float16 cache is `Uint16Array`s of its bits, as onnxruntime-node takes them.
   * @default 'float32'
   */
  readonly kvType?: 'float32' | 'float16';
}

/** One past input's KV data, in the graph's element type (float16 as its bits). */
export type KvArray = Float32Array | Uint16Array;

/** A zeroed KV array of `length` elements of the geometry's type (float16 zero is all bits 0). */
export function kvArray(geometry: Pick<ModelGeometry, 'kvType'>, length: number): KvArray {
  return geometry.kvType === 'float16' ? new Uint16Array(length) : new Float32Array(length);
}

/** A merged decoder's `use_cache_branch` feed. */
function cacheBranch(past: number): Tensor {
  return new Tensor('bool', Uint8Array.of(past > 0 ? 1 : 0), [1]);
}

/** KV data for some rows: per past input, one `[rows, kvHeads, past, headDim]` array (or longer: its start is used). */
export interface KvSource {
  readonly data: readonly KvArray[];
  readonly past: number;
}

/** A row that has KV data somewhere: `length` real tokens, right-aligned in row `row` of `source`. */
export interface KvRow {
  source: KvSource | undefined;
  row: number;
  length: number;
}

/**
 * Copies one row's real past (its `length` right-aligned entries in its source) into row `to` of `into`, whose
 * rows are `past` long, and zeroes the padding on its left. `into` must not be the row's own source arrays.
 */
export function copyRow(row: KvRow, into: readonly KvArray[], to: number, past: number, geometry: ModelGeometry): void {
  const { kvHeads, headDim } = geometry;
  const source = row.source;
  const pad = past - row.length;
  into.forEach((target, tensor) => {
    const from = source?.data[tensor];
    for (let head = 0; head < kvHeads; head += 1) {
      const base = (to * kvHeads + head) * past * headDim;
      target.fill(0, base, base + pad * headDim);
      if (from === undefined || source === undefined || row.length === 0) continue;
      const start = ((row.row * kvHeads + head) * source.past + source.past - row.length) * headDim;
      target.set(from.subarray(start, start + row.length * headDim), base + pad * headDim);
    }
  });
}

/**
 * Copies `rows` (from whatever sources they are in) into `into` (arrays long enough, none of them a row's source),
 * left-padded to `past`, and points each row at its new place. Returns the new source.
 */
export function composeInto(
  rows: readonly KvRow[],
  into: readonly KvArray[],
  past: number,
  geometry: ModelGeometry,
): KvSource {
  rows.forEach((row, to) => copyRow(row, into, to, past, geometry));
  const composed = { data: into, past };
  rows.forEach((row, to) => {
    row.source = composed;
    row.row = to;
  });
  return composed;
}

/** The past inputs of a source's first `rows` rows, as tensors over its own data (no copy). */
export function pastFeeds(source: KvSource, rows: number, geometry: ModelGeometry): Record<string, Tensor> {
  const feeds: Record<string, Tensor> = {};
  const size = rows * geometry.kvHeads * source.past * geometry.headDim;
  geometry.pastNames.forEach((name, tensor) => {
    const data = (source.data[tensor] as KvArray).subarray(0, size);
    const dims = [rows, geometry.kvHeads, source.past, geometry.headDim];
    feeds[name] = data instanceof Uint16Array ? new Tensor('float16', data, dims) : new Tensor('float32', data, dims);
  });
  return feeds;
}

/** An empty past for `rows` rows (the first call of a prefill). */
export function emptySource(geometry: ModelGeometry): KvSource {
  return { data: geometry.pastNames.map(() => kvArray(geometry, 0)), past: 0 };
}

/** The present outputs of a run, as the next source (no copy: onnxruntime already returned fresh arrays). */
export function presentSource(outputs: Record<string, Tensor>, past: number, geometry: ModelGeometry): KvSource {
  return { data: geometry.presentNames.map((name) => outputs[name]?.data as KvArray), past };
}

/**
 * Inputs of one decode step: each row feeds its last token at position `length` and attends to its real past
 * (the right `length` entries of the shared `past`) plus itself.
 */
export function decodeFeeds(
  rows: readonly (KvRow & { readonly next: number })[],
  source: KvSource,
  geometry: ModelGeometry,
): Record<string, Tensor> {
  const count = rows.length;
  const width = source.past + 1;
  const ids = new BigInt64Array(count);
  const positions = new BigInt64Array(count);
  const mask = new BigInt64Array(count * width);
  rows.forEach((row, index) => {
    ids[index] = BigInt(row.next);
    positions[index] = BigInt(row.length);
    mask.fill(1n, index * width + (source.past - row.length), (index + 1) * width);
  });
  const feeds: Record<string, Tensor> = {
    ...pastFeeds(source, count, geometry),
    input_ids: new Tensor('int64', ids, [count, 1]),
    attention_mask: new Tensor('int64', mask, [count, width]),
  };
  if (geometry.positionIds) feeds.position_ids = new Tensor('int64', positions, [count, 1]);
  if (geometry.useCacheBranch === true) feeds.use_cache_branch = cacheBranch(source.past);
  return feeds;
}

/**
 * Inputs of a prefill: either fresh prompts (no past; left-padded to the longest, positions from the mask) or one
 * chunk of one prompt continuing its own past (`past` rows of length `pastLength`, no padding).
 */
export function prefillFeeds(
  chunks: readonly (readonly number[])[],
  past: { readonly source: KvSource; readonly length: number } | undefined,
  geometry: ModelGeometry,
): Record<string, Tensor> {
  const count = chunks.length;
  const longest = chunks.reduce((max, chunk) => Math.max(max, chunk.length), 0);
  const pastLength = past?.length ?? 0;
  const width = pastLength + longest;
  const ids = new BigInt64Array(count * longest).fill(BigInt(geometry.padTokenId));
  const positions = new BigInt64Array(count * longest).fill(1n);
  const mask = new BigInt64Array(count * width);
  chunks.forEach((chunk, row) => {
    const pad = longest - chunk.length;
    mask.fill(1n, row * width + pad, (row + 1) * width);
    chunk.forEach((id, k) => {
      ids[row * longest + pad + k] = BigInt(id);
      positions[row * longest + pad + k] = BigInt(pastLength + k);
    });
  });
  const source = past?.source ?? emptySource(geometry);
  const feeds: Record<string, Tensor> = {
    ...pastFeeds(source, count, geometry),
    input_ids: new Tensor('int64', ids, [count, longest]),
    attention_mask: new Tensor('int64', mask, [count, width]),
  };
  if (geometry.positionIds) feeds.position_ids = new Tensor('int64', positions, [count, longest]);
  if (geometry.useCacheBranch === true) feeds.use_cache_branch = cacheBranch(pastLength);
  return feeds;
}
