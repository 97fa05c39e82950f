// The encoder endpoints' pure parts: the rerank / score / classify parsers and the token-count check, the label
// activations, and base64 embeddings straight from the buffer.
import { describe, expect, it } from 'vitest';
import { toBase64 } from '../src/endpoints/embeddings-endpoint.js';
import { embeddingListJson } from '../src/openai/embedding-json.js';
import { parseClassifyRequest } from '../src/openai/classify-request.js';
import { checkTokenCounts } from '../src/openai/encoder-fields.js';
import { parseRerankRequest } from '../src/openai/rerank-request.js';
import { parseScoreRequest } from '../src/openai/score-request.js';
import { labelActivation, labelProbabilities, sigmoid } from '../src/service/label-scores.js';

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
    const request = parseRerankRequest({ query: 'q', documents: ['ab', { text: 'cd' }], top_n: 9 });
    expect(request.wanted).toEqual({
      texts: ['q', 'q'],
      pairs: ['ab', 'cd'],
      fields: ['documents[0]', 'documents[1]'],
      listField: 'documents',
    });
    expect([request.topN, request.returnDocuments, request.documents]).toEqual([2, true, ['ab', 'cd']]);
    expect(parseRerankRequest({ query: 'q', documents: ['a'], return_documents: false }).returnDocuments).toBe(false);
  });

  it('names the field at fault and the bound', () => {
    expect(fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a', 'b', 'c'] }, { maxDocuments: 2 }))).toBe(
      'documents',
    );
    expect(fieldOf(() => parseRerankRequest({ query: 'q', documents: ['a'], top_n: 0 }))).toBe('top_n');
    expect(fieldOf(() => parseRerankRequest({ query: 'q'.repeat(11), documents: ['a'] }, { maxInputChars: 10 }))).toBe(
      'query',
    );
  });
});

describe('checkTokenCounts', () => {
  const wanted = parseRerankRequest({ query: 'q', documents: ['a', 'b', 'c', 'd'] }).wanted;
  it('names a pair past the model, then a request past its total, with the bound', () => {
    expect(fieldOf(() => checkTokenCounts([5, 5, 5, 5], undefined, wanted, 16, 100))).toBe('no error');
    expect(fieldOf(() => checkTokenCounts([5, 17, 5, 5], undefined, wanted, 16, 100))).toBe('documents[1]');
    // The tokenizer stopped at the fourth pair, the first past a total of 15.
    expect(fieldOf(() => checkTokenCounts([5, 5, 5, 5], 3, wanted, 16, 15))).toBe('documents');
    // A pair past the model is named before the total.
    expect(fieldOf(() => checkTokenCounts([5, 5, 5, 17], 3, wanted, 16, 15))).toBe('documents[3]');
  });
});

describe('parseScoreRequest', () => {
  it('scores one text_1 against every text_2, and two lists pairwise', () => {
    const many = parseScoreRequest({ text_1: 'q', text_2: ['a', 'b'] }).wanted;
    expect([many.texts, many.pairs, many.fields]).toEqual([
      ['q', 'q'],
      ['a', 'b'],
      ['text_2[0]', 'text_2[1]'],
    ]);
    const pairwise = parseScoreRequest({ text_1: ['x', 'y'], text_2: ['a', 'b'] }).wanted;
    expect([pairwise.texts, pairwise.pairs]).toEqual([
      ['x', 'y'],
      ['a', 'b'],
    ]);
    expect(parseScoreRequest({ text_1: 'x', text_2: 'a' }).wanted.fields).toEqual(['text_2']);
    expect(fieldOf(() => parseScoreRequest({ text_1: ['x', 'y'], text_2: ['a', 'b', 'c'] }))).toBe('text_2');
  });
});

describe('parseClassifyRequest', () => {
  it('reads a string or a list of strings, naming a bad entry', () => {
    expect(parseClassifyRequest({ input: 'hi' }).wanted).toEqual({
      texts: ['hi'],
      fields: ['input'],
      listField: 'input',
    });
    expect(parseClassifyRequest({ input: ['a', 'b'] }).wanted.fields).toEqual(['input[0]', 'input[1]']);
    expect(fieldOf(() => parseClassifyRequest({ input: ['a', 3] }))).toBe('input[1]');
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

describe('embeddingListJson', () => {
  it("writes exactly what JSON.stringify writes of OpenAI's answer, without a number[] per vector", () => {
    const vectors = [Float32Array.of(0.1, -0.25, 3.0e-7, -0, 1 / 3), Float32Array.of(Number.NaN, Infinity, 0.5)];
    const plain = {
      object: 'list',
      data: vectors.map((vector, index) => ({ object: 'embedding', index, embedding: Array.from(vector) })),
      model: 'mini "lm"',
      usage: { prompt_tokens: 7, total_tokens: 7 },
    };
    const text = embeddingListJson({ vectors, base64: false, model: 'mini "lm"', tokens: 7 });
    expect(text).toBe(JSON.stringify(plain));
    expect(JSON.parse(text).data[1].embedding).toEqual([null, null, 0.5]);
    const base64 = embeddingListJson({ vectors: [vectors[0] as Float32Array], base64: true, model: 'm', tokens: 1 });
    expect(JSON.parse(base64).data[0].embedding).toBe(toBase64(vectors[0] as Float32Array));
    expect(embeddingListJson({ vectors: [], base64: false, model: 'm', tokens: 0 })).toBe(
      JSON.stringify({ object: 'list', data: [], model: 'm', usage: { prompt_tokens: 0, total_tokens: 0 } }),
    );
  });
});
