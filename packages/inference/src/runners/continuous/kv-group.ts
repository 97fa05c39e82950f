// One length group of the running batch and its left-padded KV cache. After a decode step the group's KV is the
// step's present outputs, used as they are for the next step's past (onnxruntime-node returns fresh arrays; it
// would copy even into preallocated outputs, so those save nothing).
//
// Rows leave by moving the group's last row into the hole (one row's copy; the arrays keep their length, so the
// freed slot can take a newcomer in the same iteration). A newcomer takes a free slot when its prompt fits the
// group's past; otherwise the group is recomposed (every row copied), as it is when its past changes: trimming
// padding that every row shares, or a regroup. Recompositions write into arrays recycled from earlier steps
// (`KvArrayPool`): fresh megabyte arrays cost more in page faults and zeroing than the copy itself.
import type { Tensor } from 'onnxruntime-node';
import { composeInto, copyRow, decodeFeeds, kvArray, presentSource } from './padded-batch.js';
import { releaseBuffers } from './released-buffers.js';
import type { KvArray, KvRow, KvSource, ModelGeometry } from './padded-batch.js';

/** A row of a decode step: its KV place and the token it feeds next. */
export interface GroupRow extends KvRow {
  next: number;
}

/**
 * Sets of KV arrays (one per past input) that no row points into any more, kept for the next recomposition. Only a
 * few are kept: a step retires one set per group.
 */
export class KvArrayPool {
  readonly #count: number;
  readonly #limit: number;
  readonly #type: Pick<ModelGeometry, 'kvType'>;
  #free: KvArray[][] = [];

  constructor(count: number, limit = 8, type: Pick<ModelGeometry, 'kvType'> = {}) {
    this.#count = count;
    this.#limit = limit;
    this.#type = type;
  }

  /** Arrays of at least `size` floats (contents undefined): the smallest kept set that fits, or new ones. */
  take(size: number): KvArray[] {
    let best = -1;
    this.#free.forEach((arrays, index) => {
      const length = arrays[0]?.length ?? 0;
      if (length >= size && (best < 0 || length < (this.#free[best]?.[0]?.length ?? 0))) best = index;
    });
    if (best >= 0) return this.#free.splice(best, 1)[0] as KvArray[];
    return Array.from({ length: this.#count }, () => kvArray(this.#type, size));
  }

  /** Keeps a retired set for reuse (the largest ones, when more than the limit are kept); frees the others. */
  give(arrays: readonly KvArray[]): void {
    if ((arrays[0]?.length ?? 0) === 0) return;
    this.#free.push([...arrays]);
    if (this.#free.length > this.#limit) {
      this.#free.sort((a, b) => (b[0]?.length ?? 0) - (a[0]?.length ?? 0));
      for (const dropped of this.#free.splice(this.#limit)) releaseBuffers(dropped);
    }
  }
}

export class KvGroup<Row extends GroupRow> {
  rows: Row[] = [];
  readonly #geometry: ModelGeometry;
  readonly #pool: KvArrayPool;
  #source: KvSource;

  constructor(geometry: ModelGeometry, pool: KvArrayPool) {
    this.#geometry = geometry;
    this.#pool = pool;
    this.#source = { data: geometry.pastNames.map(() => kvArray(geometry, 0)), past: 0 };
  }

  /** The shared past length of the group's rows (the longest row's, or more once it left). */
  get past(): number {
    return this.#source.past;
  }

  /** The longest real past among the rows. */
  get longest(): number {
    let longest = 0;
    for (const row of this.rows) if (row.length > longest) longest = row.length;
    return longest;
  }

  /** Floats a row occupies in each array at `past`. */
  #rowSize(past: number): number {
    return this.#geometry.kvHeads * past * this.#geometry.headDim;
  }

  /** Drops the rows for which `leaves` is true; the last staying row moves into each hole. Returns the rows moved. */
  remove(leaves: (row: Row) => boolean): number {
    const rows = this.rows;
    const size = this.#rowSize(this.#source.past);
    let moved = 0;
    let index = 0;
    while (index < rows.length) {
      if (!leaves(rows[index] as Row)) {
        index += 1;
        continue;
      }
      // Rows leaving from the end need no move: pop them until a staying row (or the hole itself) comes off.
      let last = rows.pop() as Row;
      while (index < rows.length && leaves(last)) last = rows.pop() as Row;
      if (index >= rows.length) break;
      for (const array of this.#source.data) array.copyWithin(index * size, last.row * size, (last.row + 1) * size);
      last.row = index;
      rows[index] = last;
      moved += 1;
      index += 1;
    }
    return moved;
  }

  /** Takes `row` into the next free slot when its past fits the group's and a slot is free; false otherwise. */
  append(row: Row): boolean {
    const past = this.#source.past;
    const slot = this.rows.length;
    const size = this.#rowSize(past);
    if (slot === 0 || row.length > past || (this.#source.data[0]?.length ?? 0) < (slot + 1) * size) return false;
    copyRow(row, this.#source.data, slot, past, this.#geometry);
    row.source = this.#source;
    row.row = slot;
    this.rows.push(row);
    return true;
  }

  /**
   * Recomposes the group from `rows` (from wherever they are) into pooled arrays, at the longest row's past.
   * Returns the arrays it no longer uses, for the pool once every group has copied what it needs from them.
   */
  compose(rows: Row[]): readonly KvArray[] | undefined {
    const past = rows.reduce((longest, row) => Math.max(longest, row.length), 0);
    const source = this.#source;
    const unchanged =
      rows.length === this.rows.length &&
      past === source.past &&
      rows.every((row, index) => row.source === source && row.row === index);
    this.rows = rows;
    if (unchanged) return undefined;
    const retired = this.#source.data;
    // Always into arrays of the group's own: adopting another source's arrays (a prefill's, another group's)
    // would let them go back to the pool while this group still reads them.
    this.#source = composeInto(rows, this.#pool.take(rows.length * this.#rowSize(past)), past, this.#geometry);
    return retired;
  }

  /** The inputs of the group's next decode step. */
  feeds(): Record<string, Tensor> {
    return decodeFeeds(this.rows, this.#source, this.#geometry);
  }

  /** After the step's run: its present outputs become the rows' past, one longer. */
  stepped(outputs: Record<string, Tensor>): void {
    this.#pool.give(this.#source.data);
    this.#source = presentSource(outputs, this.#source.past + 1, this.#geometry);
    for (const row of this.rows) {
      row.source = this.#source;
      row.length += 1;
    }
  }
}
