// The continuous loop's KV bookkeeping without a model: a fake session whose "KV cache" is each row's token
// history checks, at every call, that each row's past holds exactly its own tokens (right-aligned, zero padding,
// masked as such) and answers a token that depends on the whole history. Any row copied to the wrong place, stale
// data left in a reused array, or a wrong mask changes the tokens, so outputs are compared with each sequence
// generated alone. Counts of steps and copies are deterministic: nothing depends on time.
import { describe, expect, it } from 'vitest';
import { KvArrayPool, KvGroup } from '../src/runners/continuous/kv-group.js';
import type { StepCostModel } from '../src/runners/continuous/length-groups.js';
import type { KvRow, KvSource } from '../src/runners/continuous/padded-batch.js';
import { GEOMETRY, alone, idsOf, maxOf, prompt, runLoop, sequence } from './helpers/fake-decoder.js';

describe('the continuous loop’s KV cache', () => {
  it('gives every sequence its tokens alone while rows of mixed lengths join, leave and regroup', async () => {
    // Past is expensive and copies cheap: the loop splits length groups and regroups freely.
    const costModel = { callMs: 0.01, rowMs: 0.001, rowPastMs: 0.01, copyMs: 0.000_01 };
    const plan = Array.from({ length: 14 }, (_, index) => ({
      at: index < 4 ? 0 : (index * 5) % 23,
      sequence: sequence(prompt(1 + ((index * 7) % 19), index), 1 + ((index * 11) % 40)),
    }));
    const stats = await runLoop(plan, {
      maxSequences: 5,
      maxStepTokens: 13,
      prefixCacheBytes: 0,
      maxGroups: 3,
      costModel,
    });
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    expect(stats.regroups).toBeGreaterThan(0);
    expect(stats.decodeCalls).toBeGreaterThan(stats.decodeSteps);
    expect(stats.maxRows).toBeLessThanOrEqual(5);
  });

  it('gives every sequence its tokens alone when regroups move rows between many groups', async () => {
    // Copies nearly free: the groups are recomputed whenever rows come and go, and rows move between groups.
    const costModel = { callMs: 0.001, rowMs: 0.001, rowPastMs: 0.01, copyMs: 0.000_001 };
    const plan = Array.from({ length: 40 }, (_, index) => ({
      at: index < 12 ? 0 : (index * 7) % 31,
      sequence: sequence(prompt(1 + ((index * 13) % 29), index), 2 + ((index * 17) % 45)),
    }));
    const stats = await runLoop(plan, {
      maxSequences: 12,
      maxStepTokens: 28,
      prefixCacheBytes: 0,
      maxGroups: 4,
      costModel,
    });
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    expect(stats.regroups).toBeGreaterThan(10);
  });

  it('gives the same tokens when copies are expensive and rows stay in the slots they get', async () => {
    const costModel = { callMs: 1, rowMs: 0.001, rowPastMs: 0.000_1, copyMs: 1 };
    const plan = Array.from({ length: 10 }, (_, index) => ({
      at: index < 3 ? 0 : index * 3,
      sequence: sequence(prompt(2 + ((index * 5) % 9), index), 3 + ((index * 13) % 30)),
    }));
    const stats = await runLoop(plan, {
      maxSequences: 4,
      maxStepTokens: 68,
      prefixCacheBytes: 0,
      maxGroups: 4,
      costModel,
    });
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    expect(stats.decodeCalls).toBe(stats.decodeSteps);
  });

  it('moves only the group’s last row when a row leaves, and nothing when rows leave from the end', async () => {
    const costModel = { callMs: 1, rowMs: 0.001, rowPastMs: 0.000_1, copyMs: 1 };
    // Four rows with the same prompt length decode in one group; the first one ends after 3 tokens, the others
    // after 20 (these prompts meet no EOS before).
    const first = [3, 20, 20, 20].map((max, index) => ({
      at: 0,
      sequence: sequence(prompt(6, [3, 1, 2, 4][index] as number), max),
    }));
    // A short newcomer arrives when the first row has left: it fits the group's past and takes the freed slot.
    const newcomer = { at: 5, sequence: sequence(prompt(3, 9), 4) };
    const copies: { decodeSteps: number; rowsCopied: number; regroups: number }[] = [];
    const stats = await runLoop(
      [...first, newcomer],
      { maxSequences: 4, maxStepTokens: 68, prefixCacheBytes: 0, maxGroups: 4, costModel },
      (now) => copies.push({ decodeSteps: now.decodeSteps, rowsCopied: now.rowsCopied, regroups: now.regroups }),
    );
    for (const { sequence: each } of [...first, newcomer]) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    // The first iteration composes the four prefilled rows into a group. The row that leaves after its third
    // token (slot 0) is filled by the last row: one copy, not a recomposition. The newcomer comes two steps
    // later, when the group's arrays (that step's outputs) hold only the three rows, so the group is recomposed
    // with it (four copies). Rows leaving from the end (the newcomer, then the last three together) move nothing.
    const at = (steps: number) => copies.find((entry) => entry.decodeSteps === steps);
    expect(at(1)).toEqual({ decodeSteps: 1, rowsCopied: 4, regroups: 0 });
    expect(at(3)?.rowsCopied).toBe(4 + 1);
    expect(stats.rowsCopied).toBe(4 + 1 + 4);
    expect(stats.regroups).toBe(0);
    expect(stats.joinedRunning).toBe(1);
  });
});

describe('prefill admission', () => {
  it('prefills newcomers of very different lengths together only when their padding costs less than a call', async () => {
    const run = async (costModel: StepCostModel) => {
      const plan = [sequence(prompt(2, 1), 3), sequence(prompt(12, 2), 3)].map((each) => ({ at: 0, sequence: each }));
      const stats = await runLoop(plan, {
        maxSequences: 4,
        maxStepTokens: 68,
        prefixCacheBytes: 0,
        maxGroups: 1,
        costModel,
      });
      for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
      return stats.prefillCalls;
    };
    // Padding the 2-token prompt to 12 wastes 10 padded tokens: cheap next to a call, or ten times a call.
    expect(await run({ callMs: 1, rowMs: 0.001, rowPastMs: 0.001, copyMs: 0.001 })).toBe(1);
    expect(await run({ callMs: 0.001, rowMs: 1, rowPastMs: 0.001, copyMs: 0.001 })).toBe(2);
  });
});

describe('KvGroup', () => {
  const source = (rows: readonly (readonly number[])[], past: number): KvSource => {
    const data = new Float32Array(rows.length * past);
    rows.forEach((values, row) =>
      values.forEach((value, at) => (data[row * past + past - values.length + at] = value)),
    );
    return { data: [data], past };
  };
  const rowsOf = (group: KvGroup<KvRow & { next: number }>) =>
    group.rows.map((row) => {
      const data = row.source?.data[0] as Float32Array;
      const past = row.source?.past as number;
      return Array.from(data.subarray(row.row * past, (row.row + 1) * past));
    });

  it('composes rows from any sources at the longest past, zeroing padding in recycled arrays', () => {
    const pool = new KvArrayPool(1);
    pool.give([new Float32Array(64).fill(9)]);
    const group = new KvGroup<KvRow & { next: number }>(GEOMETRY, pool);
    const a = source([[1, 2], [3]], 2);
    const b = source([[4, 5, 6]], 3);
    const rows = [
      { source: a, row: 1, length: 1, next: 0 },
      { source: b, row: 0, length: 3, next: 0 },
      { source: a, row: 0, length: 2, next: 0 },
    ];
    group.compose(rows);
    expect(group.past).toBe(3);
    expect(rowsOf(group)).toEqual([
      [0, 0, 3],
      [4, 5, 6],
      [0, 1, 2],
    ]);
    // Composing the same rows again copies nothing.
    expect(group.compose([...group.rows])).toBeUndefined();
  });

  it('fills a hole with the last row and takes a newcomer into a free slot that fits', () => {
    const group = new KvGroup<KvRow & { next: number }>(GEOMETRY, new KvArrayPool(1));
    const a = source(
      [
        [1, 2, 3],
        [4, 5, 6],
        [7, 8, 9],
      ],
      3,
    );
    group.compose([0, 1, 2].map((row) => ({ source: a, row, length: 3, next: 0 })));
    const [first, second, third] = group.rows;
    expect(group.remove((row) => row === first)).toBe(1);
    expect(group.rows).toEqual([third, second]);
    expect(rowsOf(group)).toEqual([
      [7, 8, 9],
      [4, 5, 6],
    ]);
    // Too long for the group's past: refused; short enough: takes the freed third slot, left-padded.
    expect(group.append({ source: source([[1, 1, 1, 1]], 4), row: 0, length: 4, next: 0 })).toBe(false);
    const newcomer = { source: source([[2, 2]], 2), row: 0, length: 2, next: 0 };
    expect(group.append(newcomer)).toBe(true);
    expect(newcomer.row).toBe(2);
    expect(rowsOf(group)[2]).toEqual([0, 2, 2]);
    // No slot left: refused.
    expect(group.append({ source: source([[3]], 1), row: 0, length: 1, next: 0 })).toBe(false);
  });
});
