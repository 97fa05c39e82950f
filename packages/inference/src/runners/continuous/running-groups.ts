// The running rows of the decode loop in length groups (`kv-group.ts`): where a newcomer sits, when a group is
// recomposed or trimmed, and when all groups are recomputed. Every copy of KV is decided by the cost model: a
// regroup or trim happens only when its modelled saving over the next steps pays for the copy, and the model's
// copy cost is learned from the copies made (copies into recycled arrays on a busy machine cost several times
// what the calibration's cache-warm copy does).
import { KvArrayPool, KvGroup } from './kv-group.js';
import type { GroupRow } from './kv-group.js';
import { callCost, splitByLength, splitCost, worthRegrouping } from './length-groups.js';
import type { StepCostModel } from './length-groups.js';
import type { KvArray, ModelGeometry } from './padded-batch.js';

/** Counters of the KV copies, kept in the loop's stats. */
export interface CopyStats {
  rowsCopied: number;
  regroups: number;
  trims: number;
}

const now = () => performance.now();

export class RunningGroups<Row extends GroupRow> {
  readonly #geometry: ModelGeometry;
  readonly #maxGroups: number;
  readonly #stats: CopyStats;
  readonly #pool: KvArrayPool;
  /** Some groups may be empty: they keep nothing but are reused by the next regroup. */
  #groups: KvGroup<Row>[] = [];
  #model: StepCostModel;

  constructor(geometry: ModelGeometry, costModel: StepCostModel, maxGroups: number, stats: CopyStats) {
    this.#geometry = geometry;
    this.#maxGroups = maxGroups;
    this.#stats = stats;
    this.#pool = new KvArrayPool(geometry.pastNames.length, undefined, geometry);
    this.#model = costModel;
  }

  /** The cost model, with the copy cost learned so far. */
  get model(): StepCostModel {
    return this.#model;
  }

  get groups(): readonly KvGroup<Row>[] {
    return this.#groups;
  }

  rows(): Row[] {
    return this.#groups.flatMap((group) => group.rows);
  }

  /** Drops the rows for which `leaves` is true (each group's last row takes a leaver's slot); returns how many left. */
  remove(leaves: (row: Row) => boolean): number {
    let left = 0;
    for (const group of this.#groups) {
      const before = group.rows.length;
      this.#stats.rowsCopied += group.remove(leaves);
      left += before - group.rows.length;
    }
    return left;
  }

  /** Drops every row and group (after a failed model call). */
  clear(): void {
    this.#groups = [];
  }

  /**
   * Seats newcomers: each takes a free slot in the group of least past that fits it; the others are added to that
   * group, or to the longest group when none fits, by recomposing it. Then all groups are recomputed when the
   * modelled saving of the best split pays for copying every row, or else a group whose rows all share padding
   * (its longest row left) is trimmed when that pays.
   */
  place(joining: readonly Row[]): void {
    const model = this.#model;
    const active = this.#groups.filter((group) => group.rows.length > 0).sort((a, b) => a.past - b.past);
    const additions = new Map<KvGroup<Row>, Row[]>();
    for (const row of joining) {
      const fits = active.filter((group) => group.past >= row.length);
      if (fits.some((group) => group.append(row))) {
        this.#stats.rowsCopied += 1;
        continue;
      }
      let target = fits[0] ?? active[active.length - 1];
      if (target === undefined) {
        target = this.#groups[0] ?? new KvGroup<Row>(this.#geometry, this.#pool);
        if (this.#groups.length === 0) this.#groups.push(target);
        active.push(target);
      }
      additions.set(target, [...(additions.get(target) ?? []), row]);
    }
    for (const [group, added] of additions) this.#compose(group, [...group.rows, ...added]);
    const rows = this.rows().sort((a, b) => a.length - b.length);
    const lengths = rows.map((row) => row.length);
    const ends = splitByLength(lengths, model, this.#maxGroups);
    let positions = 0;
    ends.forEach((end, index) => {
      positions += (end - (index === 0 ? 0 : (ends[index - 1] as number))) * (lengths[end - 1] as number);
    });
    const current = this.#groups.reduce((sum, group) => sum + callCost(group.rows.length, group.past, model), 0);
    if (worthRegrouping(current, splitCost(lengths, ends, model), positions, model)) {
      this.#regroup(rows, ends);
      return;
    }
    for (const group of this.#groups) {
      const count = group.rows.length;
      const longest = group.longest;
      if (count === 0 || longest >= group.past) continue;
      if (
        worthRegrouping(callCost(count, group.past, model), callCost(count, longest, model), count * longest, model)
      ) {
        this.#compose(group, [...group.rows]);
        this.#stats.trims += 1;
      }
    }
  }

  /** Recomposes the groups from `rows` (sorted by length) split at `ends`; groups left over are emptied. */
  #regroup(rows: readonly Row[], ends: readonly number[]): void {
    const started = now();
    let positions = 0;
    while (this.#groups.length < ends.length) this.#groups.push(new KvGroup<Row>(this.#geometry, this.#pool));
    // Each group writes into pooled arrays no row points into and reads rows wherever they are, so the order is
    // free; the arrays the groups leave go back to the pool only once every row has been copied out of them.
    const retired: (readonly KvArray[])[] = [];
    ends.forEach((end, index) => {
      const group = this.#groups[index] as KvGroup<Row>;
      const slice = rows.slice(index === 0 ? 0 : ends[index - 1], end);
      const old = group.compose(slice);
      if (old !== undefined) {
        retired.push(old);
        this.#stats.rowsCopied += slice.length;
        positions += slice.length * group.past;
      }
    });
    for (const group of this.#groups.slice(ends.length)) {
      const old = group.compose([]);
      if (old !== undefined) retired.push(old);
    }
    for (const arrays of retired) this.#pool.give(arrays);
    this.#stats.regroups += 1;
    this.#learnCopy(now() - started, positions);
  }

  /** Recomposes one group (its arrays go back to the pool at once: no other group reads from them). */
  #compose(group: KvGroup<Row>, rows: Row[]): void {
    const started = now();
    const old = group.compose(rows);
    if (old === undefined) return;
    this.#pool.give(old);
    this.#stats.rowsCopied += rows.length;
    this.#learnCopy(now() - started, rows.length * group.past);
  }

  #learnCopy(ms: number, positions: number): void {
    if (positions < 256) return;
    const copyMs = this.#model.copyMs * 0.8 + (ms / positions) * 0.2;
    this.#model = { ...this.#model, copyMs };
  }
}
