// Grammar masks in the continuous loop, without a model: the fake session of `fake-decoder.ts` (16 tokens, all
// logit mass on one token that depends on the whole history) with a grammar engine over a 16-token vocabulary
// ('0'-'9', 'a'-'e', and the EOS 15). Structured rows must follow their grammar whatever the model prefers, and free
// rows that share their steps must generate exactly what they generate alone.
import { beforeAll, describe, expect, it } from 'vitest';
import type { GrammarSpec } from '../src/contract/text-generation-types.js';
import { GrammarEngine } from '../src/grammar/grammar-engine.js';
import { Sequence } from '../src/runners/continuous/sequence.js';
import { seededRandom } from '../src/runners/continuous/sampler.js';
import { GenerationRow } from '../src/runners/generation-row.js';
import { alone, idsOf, maxOf, prompt, runLoop, sequence } from './helpers/fake-decoder.js';

const TOKENS = [...'0123456789abcde'.split(''), '</s>'];
let engine: GrammarEngine;

beforeAll(async () => {
  engine = await GrammarEngine.create({
    vocabulary: { tokens: TOKENS, type: 'raw', prependSpace: false },
    vocabSize: 16,
    stopTokenIds: [15],
  });
});

async function structured(spec: GrammarSpec, seed: number, max = 30): Promise<Sequence> {
  const grammar = await engine.matcher(spec);
  const output = new GenerationRow({
    promptTokens: 3,
    maxNewTokens: max,
    stop: [],
    eosTokenIds: new Set([15]),
    decode: (ids) => ids.map((id) => (id === 15 ? '' : TOKENS[id])).join(''),
  });
  return new Sequence(
    prompt(3, seed),
    output,
    { temperature: 1, topP: 1, random: seededRandom(seed), grammar },
    () => false,
  );
}

const options = {
  maxSequences: 6,
  maxStepTokens: 24,
  prefixCacheBytes: 0,
  maxGroups: 2,
  costModel: { callMs: 0.01, rowMs: 0.001, rowPastMs: 0.01, copyMs: 0.000_01 },
};

describe('grammar masks in the continuous loop', () => {
  it('structured rows follow their grammars and end with "stop" while free rows share their steps unchanged', async () => {
    const rows = await Promise.all([
      structured({ type: 'regex', pattern: '[0-9]{2}-?[a-c]{1,3}' }, 1),
      structured({ type: 'choice', choices: ['abc', 'de', '123'] }, 2),
      structured({ type: 'regex', pattern: '(0|1)+e' }, 3),
    ]);
    const free = [sequence(prompt(5, 4), 12), sequence(prompt(2, 5), 20), sequence(prompt(7, 6), 9)];
    const stats = await runLoop(
      [...rows, ...free].map((each, index) => ({ at: index % 3, sequence: each })),
      options,
    );
    for (const each of free) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    const texts = rows.map((row) => row.output.output());
    expect(texts[0]?.text).toMatch(/^[0-9]{2}-?[a-c]{1,3}$/);
    expect(['abc', 'de', '123']).toContain(texts[1]?.text);
    expect(texts[2]?.text).toMatch(/^[01]+e$/);
    for (const output of texts) expect(output.finish_reason).toBe('stop');
    // Structured and free rows decoded in the same steps.
    expect(stats.maxRows).toBeGreaterThan(3);
    expect(stats.maskedRows).toBeGreaterThan(0);
    for (const row of rows) row.sampling.grammar?.dispose();
  });

  it('a structured row cut by max_new_tokens ends with "length"', async () => {
    const row = await structured({ type: 'regex', pattern: '[0-9]+' }, 9, 4);
    await runLoop([{ at: 0, sequence: row }], options);
    expect(row.output.output()).toMatchObject({ finish_reason: 'length' });
    expect(row.output.output().text).toMatch(/^[0-9]{1,4}$/);
  });
});
