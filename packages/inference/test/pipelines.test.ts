import { rm } from 'node:fs/promises';
import { basename, dirname, sep } from 'node:path';
import { AutoTokenizer, env } from '@huggingface/transformers';
import { isBatchError } from '@microbatch/core';
import { createWorkerPool } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLASSIFIER_WEIGHTS, DIM, buildTestModels, embeddingOf } from './helpers/tiny-models.js';
import type { TestModels } from './helpers/tiny-models.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

const TEXTS = ['Once upon a time, there was a cat.', 'Hi', 'The big red ball rolled away from Lily and Tom.'];

let models: TestModels;
let tokenIds: number[][];

beforeAll(async () => {
  await ensureWorkerBuilt();
  models = await buildTestModels();
  env.allowRemoteModels = false;
  env.localModelPath = dirname(models.encoderDir) + sep;
  const tokenizer = await AutoTokenizer.from_pretrained(basename(models.encoderDir));
  tokenIds = TEXTS.map((text) => tokenizer.encode(text));
});

afterAll(async () => {
  if (models !== undefined) await rm(models.root, { recursive: true, force: true });
});

function summed(ids: readonly number[]): number[] {
  const sums = new Array<number>(DIM).fill(0);
  for (const id of ids) embeddingOf(id).forEach((value, d) => (sums[d] = (sums[d] as number) + value));
  return sums;
}

describe('feature-extraction runner', () => {
  it('returns the normalized mean embedding per text, identical batched and one by one', async () => {
    const pool = createWorkerPool({ runner: { task: 'feature-extraction', model: models.encoderDir } });
    try {
      await pool.ready;
      const batched = (await pool.run(TEXTS)) as number[][];
      const single: unknown[] = [];
      for (const text of TEXTS) single.push(...(await pool.run([text])));
      expect(batched).toEqual(single);
      batched.forEach((vector, index) => {
        const ids = tokenIds[index] as number[];
        const mean = summed(ids).map((sum) => sum / ids.length);
        const norm = Math.hypot(...mean);
        expect(vector).toHaveLength(DIM);
        vector.forEach((value, d) => expect(value).toBeCloseTo((mean[d] as number) / norm, 6));
      });
      const [bad] = await pool.run([42 as unknown as string]);
      expect(isBatchError(bad, 'INVALID_INPUT')).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it('pools the first token without normalizing when configured', async () => {
    const pool = createWorkerPool({
      runner: { task: 'feature-extraction', model: models.encoderDir, pooling: 'cls', normalize: false },
    });
    try {
      await pool.ready;
      const vectors = (await pool.run(TEXTS)) as number[][];
      // With right padding the first position is each text's first real token (the BOS token).
      vectors.forEach((vector, index) =>
        expect(vector).toEqual(embeddingOf((tokenIds[index] as number[])[0] as number)),
      );
    } finally {
      await pool.close();
    }
  });
});

describe('text-classification runner', () => {
  it('returns the top labels with softmax scores, identical batched and one by one', async () => {
    const pool = createWorkerPool({ runner: { task: 'text-classification', model: models.classifierDir, topK: 2 } });
    try {
      await pool.ready;
      const batched = await pool.run(TEXTS);
      const single: unknown[] = [];
      for (const text of TEXTS) single.push(...(await pool.run([text])));
      expect(batched).toEqual(single);
      batched.forEach((labels, index) => {
        const ids = tokenIds[index] as number[];
        const sums = summed(ids);
        const logits = [0, 1].map(
          (k) => sums.reduce((acc, sum, d) => acc + sum * (CLASSIFIER_WEIGHTS[d]?.[k] as number), 0) / ids.length,
        );
        const exp = logits.map((logit) => Math.exp(logit - Math.max(...logits)));
        const total = exp.reduce((sum, value) => sum + value, 0);
        const scores = exp.map((value) => value / total);
        const expected = ['NEGATIVE', 'POSITIVE']
          .map((label, k) => ({ label, score: scores[k] as number }))
          .sort((a, b) => b.score - a.score);
        expect(labels).toHaveLength(2);
        (labels as { label: string; score: number }[]).forEach((entry, rank) => {
          expect(entry.label).toBe(expected[rank]?.label);
          expect(entry.score).toBeCloseTo(expected[rank]?.score as number, 6);
        });
      });
    } finally {
      await pool.close();
    }
  });
});
