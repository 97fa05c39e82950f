// What admission's latency estimate weighs a generation at: its decode steps, and its prompt at the rate the
// scheduling prefills it (a step per prompt token under request scheduling's estimate, the step budget's worth of
// tokens a step in the continuous loop).
import { defaultMaxStepTokens } from '@microbatch/inference';
import { describe, expect, it } from 'vitest';
import { textCompletionCost } from '../src/index.js';

const prompt = (tokens: number) => 'abcd'.repeat(tokens);

describe('textCompletionCost', () => {
  it('prices a long prompt above a short one, at a step per step budget of prompt tokens in the continuous loop', () => {
    const budget = defaultMaxStepTokens(32);
    expect(budget).toBe(64);
    const long = textCompletionCost({ prompt: prompt(450), max_new_tokens: 16 }, budget);
    const short = textCompletionCost({ prompt: prompt(5), max_new_tokens: 16 }, budget);
    expect(long).toBeCloseTo(16 + 450 / 64, 9);
    expect(short).toBeCloseTo(16 + 5 / 64, 9);
    expect(long - short).toBeCloseTo(445 / 64, 9);
    // Request scheduling: a prompt token weighs a generated one.
    expect(textCompletionCost({ prompt: prompt(450), max_new_tokens: 16 })).toBe(466);
    expect(textCompletionCost({ prompt: prompt(5) })).toBe(21);
  });
});
