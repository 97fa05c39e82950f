// Length groups: one long row in a padded batch makes every row attend over its length, so the running rows are
// split, by length, into the groups that minimize the modelled cost of a decode step. A step then makes one
// session.run per group. Recomputing the groups copies every row's KV, so the loop does it only when the modelled
// saving over the next steps pays for the copy (`worthRegrouping`).

/** The modelled time of one decode call, `callMs + rows * (rowMs + past * rowPastMs)`, and of copying KV. */
export interface StepCostModel {
  readonly callMs: number;
  readonly rowMs: number;
  readonly rowPastMs: number;
  /** Copying one position of one row's KV (every layer's key and value). */
  readonly copyMs: number;
}

/** The most length groups one decode step is split into (a `session.run` each). */
export const MAX_LENGTH_GROUPS = 4;

/**
 * How many decode steps a saving is counted over when deciding to copy KV for it: rows come and go, so a grouping
 * rarely lasts much longer than this, and a copy that pays for itself only after many more steps is not worth it.
 */
export const REGROUP_HORIZON_STEPS = 8;

/** The modelled time of one decode call of `rows` rows at past `past`. */
export function callCost(rows: number, past: number, model: StepCostModel): number {
  return rows === 0 ? 0 : model.callMs + rows * (model.rowMs + past * model.rowPastMs);
}

/**
 * Whether moving from a step of modelled cost `current` to one of cost `better` pays, over
 * `REGROUP_HORIZON_STEPS` steps, for copying `positions` row-positions of KV.
 */
export function worthRegrouping(current: number, better: number, positions: number, model: StepCostModel): boolean {
  return (current - better) * REGROUP_HORIZON_STEPS > positions * model.copyMs;
}

/** The modelled cost of the steps of the groups `splitByLength` returned (`ends`) over `lengths`. */
export function splitCost(lengths: readonly number[], ends: readonly number[], model: StepCostModel): number {
  let cost = 0;
  let start = 0;
  for (const end of ends) {
    cost += callCost(end - start, lengths[end - 1] as number, model);
    start = end;
  }
  return cost;
}

/**
 * Splits rows sorted by ascending length into at most `maxGroups` contiguous groups of least modelled cost
 * (dynamic programming, O(groups x rows^2)); returns each group's exclusive end index.
 */
export function splitByLength(lengths: readonly number[], model: StepCostModel, maxGroups: number): number[] {
  const count = lengths.length;
  if (count === 0) return [];
  const groupCost = (from: number, to: number) =>
    model.callMs + (to - from) * (model.rowMs + (lengths[to - 1] as number) * model.rowPastMs);
  // best[g][j]: least cost of the first j rows in g groups; cut[g][j]: where its last group starts.
  let best: number[] = Array.from({ length: count + 1 }, (_, j) => (j === 0 ? 0 : groupCost(0, j)));
  const cuts: number[][] = [Array.from({ length: count + 1 }, () => 0)];
  let groups = 1;
  for (let g = 2; g <= Math.min(maxGroups, count); g += 1) {
    const next: number[] = Array.from({ length: count + 1 }, () => Number.POSITIVE_INFINITY);
    const cut: number[] = Array.from({ length: count + 1 }, () => 0);
    for (let j = g; j <= count; j += 1) {
      for (let i = g - 1; i < j; i += 1) {
        const cost = (best[i] as number) + groupCost(i, j);
        if (cost < (next[j] as number)) {
          next[j] = cost;
          cut[j] = i;
        }
      }
    }
    if (!((next[count] as number) < (best[count] as number))) break;
    best = next;
    cuts.push(cut);
    groups = g;
  }
  const ends: number[] = [];
  let end = count;
  for (let g = groups; g >= 1; g -= 1) {
    ends.unshift(end);
    end = (cuts[g - 1] as number[])[end] as number;
  }
  return ends;
}
