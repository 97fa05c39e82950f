// `microbatch serve --task rerank` (a cross-encoder: /v1/rerank, /rerank, /v1/score) and `--task
// text-classification` (/classify) against transformers.js itself on the same generated folder (the real MiniLM
// WordPiece tokenizer, one attention layer of random weights, BERT's classification head): the answers' scores
// equal transformers.js's within 1e-4, whatever the batch they were padded in.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTokenizer } from '@microbatch/inference';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { referenceClassify, referenceScores } from '../../inference/test/helpers/transformers-classifier-reference.js';
import { DOCUMENTS, LABELS, QUERY, expectClose, post, runCli, writeEncoders } from './helpers/encoder-fixtures.js';
import { BIN, READY } from './helpers/serve-config.js';

let scratch: string;
let reranker: string;
let classifier: string;
let scores: number[];
let probabilities: Record<string, number>[];
let pairTokens: number[];

function serve(task: string, model: string, framework = 'express'): Promise<ServerProcess> {
  return startServerProcess({
    args: [BIN, 'serve', '--task', task, '--model', model, '--port', '0', '--framework', framework],
    env: { ...process.env },
    ready: READY,
  });
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-encoders-'));
  ({ reranker, classifier } = await writeEncoders(scratch));
  scores = await referenceScores(reranker, QUERY, DOCUMENTS);
  probabilities = await referenceClassify(classifier, DOCUMENTS);
  const tokenizer = await loadTokenizer(reranker);
  pairTokens = DOCUMENTS.map((document) => tokenizer.encodePair(QUERY, document).ids.length);
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe('microbatch serve --task rerank', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await serve('rerank', reranker);
  }, 120_000);
  afterAll(() => server?.stop());

  it("ranks the documents by transformers.js's own scores, best first, with their documents and usage", async () => {
    const { status, json } = await post(server, '/v1/rerank', {
      model: 'tiny-cross-encoder',
      query: QUERY,
      documents: DOCUMENTS,
    });
    expect(status).toBe(200);
    expect(json.model).toBe('tiny-cross-encoder');
    const order = DOCUMENTS.map((_, index) => index).sort((a, b) => (scores[b] as number) - (scores[a] as number));
    expect(json.results.map((result: { index: number }) => result.index)).toEqual(order);
    expectClose(
      json.results.map((result: { relevance_score: number }) => result.relevance_score),
      order.map((index) => scores[index] as number),
    );
    expect(json.results.map((result: { document: { text: string } }) => result.document.text)).toEqual(
      order.map((index) => DOCUMENTS[index]),
    );
    expect(json.usage.total_tokens).toBe(pairTokens.reduce((a, b) => a + b, 0));
    // Spread across the range, so a constant or order-only answer could not pass.
    expect(Math.max(...scores) - Math.min(...scores)).toBeGreaterThan(1e-3);
  });

  it('answers /rerank the same, with top_n, {text} documents and return_documents: false', async () => {
    const { status, json } = await post(server, '/rerank', {
      query: QUERY,
      documents: DOCUMENTS.map((text) => ({ text })),
      top_n: 2,
      return_documents: false,
    });
    expect(status).toBe(200);
    expect(json.results).toHaveLength(2);
    const best = DOCUMENTS.map((_, index) => index).sort((a, b) => (scores[b] as number) - (scores[a] as number));
    expect(json.results.map((result: { index: number }) => result.index)).toEqual(best.slice(0, 2));
    expect(json.results.every((result: object) => !('document' in result))).toBe(true);
  });

  it('scores text_1 against every text_2, and two lists pairwise (/v1/score)', async () => {
    const many = await post(server, '/v1/score', { text_1: QUERY, text_2: DOCUMENTS });
    expect(many.status).toBe(200);
    expect(many.json.data.map((item: { index: number }) => item.index)).toEqual([0, 1, 2, 3, 4]);
    expectClose(
      many.json.data.map((item: { score: number }) => item.score),
      scores,
    );
    const pairwise = await post(server, '/v1/score', { text_1: [QUERY, QUERY], text_2: [DOCUMENTS[3], DOCUMENTS[1]] });
    expectClose(
      pairwise.json.data.map((item: { score: number }) => item.score),
      [scores[3] as number, scores[1] as number],
    );
    expect(pairwise.json.usage.prompt_tokens).toBe((pairTokens[3] as number) + (pairTokens[1] as number));
  });

  it('scores concurrent requests the same as alone (pairs of different requests share padded calls)', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        post(server, '/v1/score', { text_1: QUERY, text_2: DOCUMENTS.slice(index % 5) }),
      ),
    );
    answers.forEach((answer, index) => {
      expect(answer.status).toBe(200);
      expectClose(
        answer.json.data.map((item: { score: number }) => item.score),
        scores.slice(index % 5),
      );
    });
  });

  it("answers another method on its paths with 405 and Allow, in OpenAI's shape", async () => {
    for (const path of ['/v1/rerank', '/rerank', '/v1/score']) {
      const res = await fetch(`${server.url}${path}`);
      expect([res.status, res.headers.get('allow')]).toEqual([405, 'POST']);
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    }
  });

  it('has no /classify route', async () => {
    const { status } = await post(server, '/classify', { input: 'hi' });
    expect(status).toBe(404);
  });
});

describe('microbatch serve --task text-classification', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await serve('text-classification', classifier, 'fastify');
  }, 120_000);
  afterAll(() => server?.stop());

  it("answers every label's probability as transformers.js's text-classification pipeline does", async () => {
    const { status, json } = await post(server, '/classify', { model: 'tiny-classifier', input: DOCUMENTS });
    expect(status).toBe(200);
    expect(json.data).toHaveLength(DOCUMENTS.length);
    json.data.forEach((item: { index: number; label: string; probs: number[]; num_classes: number }, index: number) => {
      const expected = probabilities[index] as Record<string, number>;
      expect(item.index).toBe(index);
      expect(item.num_classes).toBe(3);
      expectClose(
        item.probs,
        LABELS.map((label) => expected[label] as number),
      );
      const best = LABELS.reduce((a, b) => ((expected[a] as number) >= (expected[b] as number) ? a : b));
      expect(item.label).toBe(best);
    });
    // A single string is one input.
    const one = await post(server, '/classify', { input: DOCUMENTS[1] });
    expectClose(
      one.json.data[0].probs,
      LABELS.map((label) => (probabilities[1] as Record<string, number>)[label] as number),
    );
  });

  it('has no rerank route', async () => {
    const { status } = await post(server, '/v1/rerank', { query: 'q', documents: ['d'] });
    expect(status).toBe(404);
  });
});

describe('microbatch serve --task rerank --max-queue-size 4', () => {
  it('bounds the documents of one request by the queue (they are admitted together), naming the bound', async () => {
    const server = await startServerProcess({
      args: [BIN, 'serve', '--task', 'rerank', '--model', reranker, '--port', '0', '--max-queue-size', '4'],
      env: { ...process.env },
      ready: READY,
    });
    try {
      const five = await post(server, '/v1/rerank', { query: QUERY, documents: DOCUMENTS });
      expect([five.status, five.json.error.param, five.json.error.details.limit]).toEqual([400, 'documents', 4]);
      const four = await post(server, '/v1/rerank', { query: QUERY, documents: DOCUMENTS.slice(0, 4) });
      expect(four.status).toBe(200);
    } finally {
      await server.stop();
    }
  }, 120_000);
});

describe('microbatch serve encoder tasks refuse what does not apply', () => {
  it('refuses --task rerank on a model with several labels, naming them', async () => {
    const run = await runCli(['serve', '--task', 'rerank', '--model', classifier, '--port', '0']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/3 labels; a rerank model \(cross-encoder\) has one relevance logit/);
  }, 60_000);

  it('refuses --pooling with --task text-classification, naming it', async () => {
    const run = await runCli(['serve', '--task', 'text-classification', '--model', classifier, '--pooling', 'mean']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^error: --pooling does not apply to --task text-classification$/m);
  }, 60_000);
});
