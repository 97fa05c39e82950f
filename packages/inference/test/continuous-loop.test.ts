// The pure parts of the continuous scheduler: KV rows merged by left padding, length groups, per-row sampling.
import { describe, expect, it } from 'vitest';
import { composeInto, decodeFeeds, prefillFeeds } from '../src/runners/continuous/padded-batch.js';
import type { KvRow, KvSource, ModelGeometry } from '../src/runners/continuous/padded-batch.js';
import { splitByLength } from '../src/runners/continuous/length-groups.js';
import { argmax, sampleToken, seededRandom } from '../src/runners/continuous/sampler.js';

const GEOMETRY: ModelGeometry = {
  pastNames: ['past_key_values.0.key'],
  presentNames: ['present.0.key'],
  kvHeads: 2,
  headDim: 1,
  vocabSize: 4,
  padTokenId: 0,
  positionIds: true,
};

/** A source whose value at (row, head, position) is row*100 + head*10 + position (0 where padding). */
function source(lengths: readonly number[], past: number): KvSource {
  const data = new Float32Array(lengths.length * 2 * past);
  lengths.forEach((length, row) => {
    for (let head = 0; head < 2; head += 1) {
      for (let position = past - length; position < past; position += 1) {
        data[(row * 2 + head) * past + position] = (row + 1) * 100 + head * 10 + (position - (past - length));
      }
    }
  });
  return { data: [data], past };
}

describe('composeInto', () => {
  it('merges rows from two sources into recycled arrays, left-padded to a shared past', () => {
    const running = source([2, 4], 5); // one column of padding every row shares
    const fresh = source([3], 3);
    const rows: KvRow[] = [
      { source: running, row: 1, length: 4 },
      { source: fresh, row: 0, length: 3 },
    ];
    // Into recycled arrays: stale values where padding goes must come out as zeros.
    const composed = composeInto(rows, [new Float32Array(16).fill(7)], 4, GEOMETRY);
    expect(composed.past).toBe(4);
    expect(Array.from(composed.data[0] as Float32Array)).toEqual([
      200,
      201,
      202,
      203,
      210,
      211,
      212,
      213, // row 1 of `running`, its 4 positions
      0,
      100,
      101,
      102,
      0,
      110,
      111,
      112, // `fresh` row 0, padded on the left by 1
    ]);
    expect(rows.map((row) => [row.source, row.row])).toEqual([
      [composed, 0],
      [composed, 1],
    ]);
  });

  it('builds decode inputs whose mask covers each row’s real past plus itself and positions from its length', () => {
    const kv = source([1, 3], 3);
    const feeds = decodeFeeds(
      [
        { source: kv, row: 0, length: 1, next: 7 },
        { source: kv, row: 1, length: 3, next: 9 },
      ],
      kv,
      GEOMETRY,
    );
    expect(Array.from(feeds.attention_mask?.data as BigInt64Array, Number)).toEqual([0, 0, 1, 1, 1, 1, 1, 1]);
    expect(Array.from(feeds.position_ids?.data as BigInt64Array, Number)).toEqual([1, 3]);
    expect(Array.from(feeds.input_ids?.data as BigInt64Array, Number)).toEqual([7, 9]);
    expect(feeds['past_key_values.0.key']?.dims).toEqual([2, 2, 3, 1]);
  });

  it('builds left-padded prefill inputs with positions counted from the first real token', () => {
    const feeds = prefillFeeds([[5, 6, 7], [8]], undefined, GEOMETRY);
    expect(Array.from(feeds.input_ids?.data as BigInt64Array, Number)).toEqual([5, 6, 7, 0, 0, 8]);
    expect(Array.from(feeds.attention_mask?.data as BigInt64Array, Number)).toEqual([1, 1, 1, 0, 0, 1]);
    expect(Array.from(feeds.position_ids?.data as BigInt64Array, Number)).toEqual([0, 1, 2, 1, 1, 0]);
    const chunk = prefillFeeds([[9, 10]], { source: source([3], 3), length: 3 }, GEOMETRY);
    expect(Array.from(chunk.position_ids?.data as BigInt64Array, Number)).toEqual([3, 4]);
    expect(chunk.attention_mask?.dims).toEqual([1, 5]);
  });
});

describe('splitByLength', () => {
  const model = { callMs: 1, rowMs: 0.1, rowPastMs: 0.01, copyMs: 0.001 };

  it('keeps similar lengths in one group and splits off a long row when that is cheaper', () => {
    expect(splitByLength([10, 11, 12, 13], model, 4)).toEqual([4]);
    // Padding 7 short rows to 500 costs 7 * 490 * 0.01 = 34 ms; a second call costs 1 ms.
    expect(splitByLength([10, 10, 11, 12, 12, 13, 14, 500], model, 4)).toEqual([7, 8]);
    expect(splitByLength([10, 10, 11, 12, 12, 13, 14, 500], model, 1)).toEqual([8]);
    expect(splitByLength([], model, 4)).toEqual([]);
  });
});

describe('sampling', () => {
  const logits = Float32Array.from([0.5, 2, 1.9, -1]);

  it('is greedy at temperature 0 and keeps only the top token at a tiny top_p', () => {
    const random = seededRandom(1);
    expect(argmax(logits)).toBe(1);
    expect(sampleToken(logits, { temperature: 0, topP: 1, random }, new Float64Array(4))).toBe(1);
    for (let draw = 0; draw < 50; draw += 1) {
      expect(sampleToken(logits, { temperature: 1.5, topP: 1e-6, random }, new Float64Array(4))).toBe(1);
    }
  });

  it('draws every token of the nucleus, in proportion, from a seeded stream', () => {
    const counts = [0, 0, 0, 0];
    const random = seededRandom(42);
    for (let draw = 0; draw < 4000; draw += 1) {
      const token = sampleToken(logits, { temperature: 1, topP: 0.9, random }, new Float64Array(4));
      counts[token] = (counts[token] ?? 0) + 1;
    }
    // top_p 0.9 keeps tokens 1 and 2 (about 0.45 + 0.41 of the mass) plus token 0 (0.10) to reach 0.9; never token 3.
    expect(counts[3]).toBe(0);
    expect(counts[1]).toBeGreaterThan(counts[2] as number);
    expect(counts[0]).toBeGreaterThan(0);
    const again = seededRandom(42);
    expect(Array.from({ length: 20 }, () => again())).toEqual(
      Array.from(
        { length: 20 },
        (
          (r) => () =>
            r()
        )(seededRandom(42)),
      ),
    );
  });
});
