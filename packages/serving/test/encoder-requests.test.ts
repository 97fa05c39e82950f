// The encoder endpoints' pure parts: the rerank / score / classify parsers over a stand-in tokenizer (one token per
// character, plus 2 or 3 special tokens), the label activations, and base64 embeddings straight from the buffer.
import { describe, expect, it } from 'vitest';
import { toBase64 } from '../src/endpoints/embeddings-endpoint.js';
import { parseClassifyRequest } from '../src/openai/classify-request.js';
import { parseRerankRequest } from '../src/openai/rerank-request.js';
import { parseScoreRequest } from '../src/openai/score-request.js';
import { labelActivation, labelProbabilities, sigmoid } from '../src/service/label-scores.js';

interface Item {
  readonly text: string;
  readonly pair?: string;
}
const model = {
  maxTokens: 16,
  tokenize: (text: string): Item => ({ text }),
  tokenizePair: (text: string, pair: string): Item => ({ text, pair }),
  tokens: (item: Item) => item.text.length + (item.pair === undefined ? 2 : item.pair.length + 3),
};

const fieldOf = (run: () => unknown): unknown => {
  try {
    run();
  } catch (error) {
    return (error as { details?: { field?: string } }).details?.field;
  }
  return 'no error';
};

describe('parseRerankRequest', () => {
  it('pairs the query with each document, strings or {text}, top_n clamped to the documents', () => {
    const request = parseRerankRequest({ query: 'q', documents: ['ab', { text: 'cd' }], top_n: 9 }, model);
    expect(request.items).toEqual([
      { text: 'q', pair: 'ab' },
      { text: 'q', pair: 'cd' },
    ]);
    expect([request.topN, request.returnDocuments, request.documents]).toEqual([2, true, ['ab', 'cd']]);
    expect(parseRerankRequest({ query: 'q', documents: ['a'], return_documents: false }, model).returnDocuments).toBe(
      false,
    );
  });

  it('names the field at fault and the bound', () => {
    expect(
      fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a', 'b', 'c'] }, model, { maxDocuments: 2 })),
    ).toBe('documents');
    expect(fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a'.repeat(13)] }, model))).toBe('documents[0]');
    expect(fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a'.repeat(12)] }, model))).toBe('no error');
    expect(fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a'], top_n: 0 }, model))).toBe('top_n');
    // 3 documents of 5 tokens each (q + a + 3 specials) pass a budget of 15; a fourth does not.
    const budget = { maxRequestTokens: 15 };
    expect(fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a', 'b', 'c'] }, model, budget))).toBe(
      'no error',
    );
    expect(fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a', 'b', 'c', 'd'] }, model, budget))).toBe(
      'documents',
    );
    expect(
      fieldOf(() => parseRerankRequest({ query: 'q'.repeat(11), documents: ['a'] }, model, { maxInputChars: 10 })),
    ).toBe('query');
  });
});

describe('parseScoreRequest', () => {
  it('scores one text_1 against every text_2, and two lists pairwise', () => {
    expect(parseScoreRequest({ text_1: 'q', text_2: ['a', 'b'] }, model).items).toEqual([
      { text: 'q', pair: 'a' },
      { text: 'q', pair: 'b' },
    ]);
    expect(parseScoreRequest({ text_1: ['x', 'y'], text_2: ['a', 'b'] }, model).items).toEqual([
      { text: 'x', pair: 'a' },
      { text: 'y', pair: 'b' },
    ]);
    expect(fieldOf(() => parseScoreRequest({ text_1: ['x', 'y'], text_2: ['a', 'b', 'c'] }, model))).toBe('text_2');
  });
});

describe('parseClassifyRequest', () => {
  it('reads a string or a list of strings, naming a bad entry', () => {
    expect(parseClassifyRequest({ input: 'hi' }, model).items).toEqual([{ text: 'hi' }]);
    expect(parseClassifyRequest({ input: ['a', 'b'] }, model).items).toHaveLength(2);
    expect(fieldOf(() => parseClassifyRequest({ input: ['a', 3] }, model))).toBe('input[1]');
  });
});

describe('label scores', () => {
  it('softmax sums to one and keeps the order; sigmoid per label for multi-label and one-label models', () => {
    const softmax = labelProbabilities(Float32Array.of(1, 2, 3), 'softmax');
    expect(softmax.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
    expect(softmax[2]).toBeCloseTo(Math.exp(3) / (Math.exp(1) + Math.exp(2) + Math.exp(3)), 6);
    expect(labelProbabilities(Float32Array.of(1000, 0), 'softmax')[0]).toBe(1);
    expect(labelActivation({ problem_type: 'multi_label_classification' }, 3)).toBe('sigmoid');
    expect(labelActivation({}, 1)).toBe('sigmoid');
    expect(labelActivation({}, 2)).toBe('softmax');
    expect([sigmoid(0), sigmoid(-800), sigmoid(800)]).toEqual([0.5, 0, 1]);
  });
});

describe('toBase64', () => {
  it('is the little-endian float32 bytes, also for a view into a larger buffer', () => {
    const whole = Float32Array.of(9, 0.25, -1.5, 3.0e-7);
    const view = whole.subarray(1);
    const expected = Buffer.alloc(12);
    view.forEach((value, index) => expected.writeFloatLE(value, index * 4));
    expect(toBase64(view)).toBe(expected.toString('base64'));
  });
});
