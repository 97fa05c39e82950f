// `pnpm start` then `pnpm query`, as the tutorial runs them: the nine concurrent queries show the batch they shared
// in the decode loop of continuous scheduling (the batcher hands the loop one request at a time).
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ChildServer, startChild } from '../testing/child-server.js';
import { TUTORIAL_TEXTS, describeBatches, queryInParallel } from './src/query.js';

const LOOP_LINE =
  /\[inference\] decode loop, last [\d.]+ s: (\d+) steps, [\d.]+ rows per step \(max (\d+)\), \d+ tokens\/s, (\d+) joined, (\d+) left/g;

describe('pnpm query against pnpm start (continuous scheduling)', () => {
  let server: ChildServer;

  beforeAll(async () => {
    server = await startChild(fileURLToPath(new URL('.', import.meta.url)), ['--import', 'tsx', 'src/main.ts']);
  });
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
  });

  it('shows the nine prompts sharing decode steps, in the headers and in the log', async () => {
    // Each query generates 64 tokens: the first is still decoding when the others arrive, however slow the machine.
    const results = await queryInParallel(server.url);
    expect(results.map((result) => result.status)).toEqual(TUTORIAL_TEXTS.map(() => 200));
    for (const { batchId, batchSize } of results) {
      expect(batchId).toMatch(/^w0-[0-9a-f]{4}:\d+$/);
      // At most the example's `maxSequences` (8) rows.
      expect(batchSize).toBeGreaterThanOrEqual(1);
      expect(batchSize).toBeLessThanOrEqual(8);
    }
    // A batch id is a decode step: every query carrying it reports that step's rows, and no more queries carry it
    // than it had rows.
    const byId = new Map<string, typeof results>();
    for (const result of results) byId.set(result.batchId, [...(byId.get(result.batchId) ?? []), result]);
    for (const [id, members] of byId) {
      const sizes = new Set(members.map((member) => member.batchSize));
      expect({ id, sizes: [...sizes] }).toEqual({ id, sizes: [members[0]?.batchSize] });
      expect(members.length).toBeLessThanOrEqual(members[0]?.batchSize ?? 0);
    }
    // Shared: sizes above 1, and an id carried by several queries.
    expect(Math.max(...results.map((result) => result.batchSize))).toBeGreaterThan(1);
    expect(Math.max(...[...byId.values()].map((members) => members.length))).toBeGreaterThan(1);
    expect(describeBatches(results)).toMatch(/batch w0-[0-9a-f]{4}:\d+: size [2-8] \([2-8] of these queries\)/);

    // The log reports the loop (at most a line a second), not nine "size 1" batches; its largest step is the
    // largest batch the headers report (nothing else ran).
    await vi.waitFor(
      () => {
        const left = [...server.output().matchAll(LOOP_LINE)].reduce((sum, line) => sum + Number(line[4]), 0);
        expect(left).toBe(TUTORIAL_TEXTS.length);
      },
      { timeout: 30_000, interval: 100 },
    );
    const lines = [...server.output().matchAll(LOOP_LINE)];
    expect(lines.reduce((sum, line) => sum + Number(line[3]), 0)).toBe(TUTORIAL_TEXTS.length);
    expect(Math.max(...lines.map((line) => Number(line[2])))).toBe(
      Math.max(...results.map((result) => result.batchSize)),
    );
    expect(server.output()).not.toMatch(/batch \d+: size 1/);
  });
});
