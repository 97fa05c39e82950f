// `microbatch serve --config FILE` as a RAG server against real processes: a text generator (the bundled
// tinystories), an embedder and a cross-encoder (generated here) behind one app, each request routed by its `model`;
// the rerank and score answers equal transformers.js's own on the same folder within 1e-4, as `serve --task rerank`
// answers them. Then a classifier and a reranker multiplexed with `--max-loaded-models 1`.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORIES, configFile as writeConfig, modelMetric, serveConfig } from './helpers/serve-config.js';
import { referenceClassify, referenceScores } from '../../inference/test/helpers/transformers-classifier-reference.js';
import {
  DOCUMENTS as ALL_DOCUMENTS,
  LABELS,
  QUERY,
  expectClose,
  post,
  writeEncoders,
} from './helpers/encoder-fixtures.js';

// The first four: the rerank answers' order is checked on them.
const DOCUMENTS = ALL_DOCUMENTS.slice(0, 4);

let scratch: string;
let embedder: string;
let reranker: string;
let classifier: string;
let scores: number[];
let probabilities: Record<string, number>[];

const configFile = (name: string, text: string): Promise<string> => writeConfig(scratch, name, text);

const byScore = (values: readonly number[]) =>
  values.map((_, index) => index).sort((a, b) => (values[b] as number) - (values[a] as number));

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-rag-'));
  ({ embedder, reranker, classifier } = await writeEncoders(scratch));
  scores = await referenceScores(reranker, QUERY, DOCUMENTS);
  probabilities = await referenceClassify(classifier, DOCUMENTS);
  // Spread across the range, so a constant or order-only answer could not pass.
  expect(Math.max(...scores) - Math.min(...scores)).toBeGreaterThan(1e-3);
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe.each(['express', 'nest'])('a RAG server in one config: generator, embedder, reranker (%s)', (framework) => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    const config = await configFile(
      `rag-${framework}.yaml`,
      [
        'models:',
        `  - { name: chat, path: ${STORIES}, task: text-generation }`,
        `  - { name: embed, path: ${embedder}, task: feature-extraction }`,
        `  - { name: rerank, path: ${reranker}, task: rerank, maxBatchCost: 4096 }`,
        '',
      ].join('\n'),
    );
    server = await serveConfig(config, ['--framework', framework, '--max-threads', '3']);
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(() => server?.stop());

  it('lists the three models with their tasks and plans their threads', async () => {
    const models = await openai.models.list();
    expect(models.data.map((model) => model.id)).toEqual(['chat', 'embed', 'rerank']);
    expect(models.data.map((model) => (model as unknown as { task: string }).task)).toEqual([
      'text-generation',
      'feature-extraction',
      'rerank',
    ]);
    const start = server.jsonLines().find((line) => (line as { maxThreads?: number }).maxThreads !== undefined) as {
      msg: string;
    };
    expect(start.msg).toContain('chat 1x1=1, embed 1x1=1, rerank 1x1=1');
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });

  it('answers each endpoint for its model: completions, embeddings, and rerank scores as transformers.js', async () => {
    const completion = await openai.completions.create({ model: 'chat', prompt: 'Once upon a time', max_tokens: 4 });
    expect(completion.model).toBe('chat');
    expect(completion.usage?.completion_tokens).toBe(4);
    const embedding = await openai.embeddings.create({ model: 'embed', input: DOCUMENTS });
    expect(embedding.model).toBe('embed');
    expect(embedding.data.map((item) => item.embedding.length)).toEqual([32, 32, 32, 32]);

    const ranked = await post(server, '/v1/rerank', { model: 'rerank', query: QUERY, documents: DOCUMENTS });
    expect(ranked.status).toBe(200);
    expect(ranked.json.model).toBe('rerank');
    const order = byScore(scores);
    expect(ranked.json.results.map((result: { index: number }) => result.index)).toEqual(order);
    expectClose(
      ranked.json.results.map((result: { relevance_score: number }) => result.relevance_score),
      order.map((index) => scores[index] as number),
    );
    // TEI's path, and no `model`: the first rerank model answers, as a one-model server would.
    const tei = await post(server, '/rerank', {
      query: QUERY,
      documents: DOCUMENTS,
      top_n: 2,
      return_documents: false,
    });
    expect(tei.status).toBe(200);
    expect(tei.json.model).toBe('rerank');
    expect(tei.json.results.map((result: { index: number }) => result.index)).toEqual(order.slice(0, 2));
    const scored = await post(server, '/v1/score', { model: 'rerank', text_1: QUERY, text_2: DOCUMENTS });
    expect(scored.status).toBe(200);
    expectClose(
      scored.json.data.map((item: { score: number }) => item.score),
      scores,
    );
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/microbatch_batches_total\{name="rerank",model="rerank"\} [1-9]/);
  });

  it('answers an unknown model 404 model_not_found and a model of another task 400 naming both', async () => {
    const unknown = await post(server, '/v1/rerank', { model: 'bge-reranker', query: QUERY, documents: DOCUMENTS });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatchObject({ code: 'model_not_found', param: 'model' });
    const chatAsReranker = await post(server, '/v1/score', { model: 'chat', text_1: QUERY, text_2: DOCUMENTS });
    expect(chatAsReranker.status).toBe(400);
    expect(chatAsReranker.json.error.message).toBe(
      'The model "chat" is a text-generation model; /v1/score serves rerank models',
    );
    const rerankAsEmbedder = await openai.embeddings.create({ model: 'rerank', input: 'x' }).catch((e) => e);
    expect(rerankAsEmbedder).toBeInstanceOf(OpenAI.BadRequestError);
    expect((rerankAsEmbedder as Error).message).toContain(
      'The model "rerank" is a rerank model; /v1/embeddings serves feature-extraction models',
    );
    const rerankAsClassifier = await post(server, '/classify', { model: 'rerank', input: 'x' });
    expect(rerankAsClassifier.status).toBe(400);
    expect(rerankAsClassifier.json.error.message).toBe(
      'The model "rerank" is a rerank model; /classify serves text-classification models',
    );
    // No classifier here: without `model`, the 400 says so rather than guessing.
    const noClassifier = await post(server, '/classify', { input: 'x' });
    expect(noClassifier.status).toBe(400);
    expect(noClassifier.json.error.message).toContain('no model of this server serves text-classification');
    // The encoder endpoint's own validation still answers, after routing.
    const empty = await post(server, '/v1/rerank', { model: 'rerank', query: '', documents: DOCUMENTS });
    expect(empty.status).toBe(400);
    expect(empty.json.error.message).toContain('query');
  });
});

describe('--max-loaded-models 1 with a classifier and a reranker', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    const config = await configFile(
      'encoders.json',
      JSON.stringify({
        models: [
          { name: 'mood', path: classifier, task: 'text-classification' },
          { name: 'rerank', path: reranker, task: 'rerank' },
        ],
      }),
    );
    server = await serveConfig(config, ['--max-loaded-models', '1', '--framework', 'fastify']);
  }, 120_000);
  afterAll(() => server?.stop());

  it('loads each on its first request and swaps them as requests alternate, answers unchanged', async () => {
    const metric = (name: string, model: string) => modelMetric(server, `microbatch_model_${name}`, model);
    expect(await metric('loaded', 'mood')).toBe(0);
    expect(await metric('loaded', 'rerank')).toBe(0);
    for (let round = 0; round < 2; round += 1) {
      const classified = await post(server, '/classify', { model: 'mood', input: DOCUMENTS });
      expect(classified.status).toBe(200);
      expect(classified.json.model).toBe('mood');
      classified.json.data.forEach((item: { label: string; probs: number[] }, index: number) => {
        const expected = probabilities[index] as Record<string, number>;
        expectClose(
          item.probs,
          LABELS.map((label) => expected[label] as number),
        );
        expect(item.label).toBe(LABELS[byScore(item.probs)[0] as number]);
      });
      expect(await metric('loaded', 'mood')).toBe(1);
      const scored = await post(server, '/v1/score', { model: 'rerank', text_1: QUERY, text_2: DOCUMENTS });
      expect(scored.status).toBe(200);
      expectClose(
        scored.json.data.map((item: { score: number }) => item.score),
        scores,
      );
      expect(await metric('loaded', 'rerank')).toBe(1);
      expect(await metric('loaded', 'mood')).toBe(0);
    }
    expect(await metric('loads_total', 'mood')).toBe(2);
    expect(await metric('loads_total', 'rerank')).toBe(2);
    expect(await metric('unloads_total', 'mood')).toBe(2);
    expect(await metric('unloads_total', 'rerank')).toBe(1);
  }, 120_000);
});
