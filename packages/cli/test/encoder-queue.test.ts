// The encoders over `--queue`, on a throwaway Redis and NATS: `microbatch worker --task feature-extraction|rerank|
// text-classification` runs each generated model (the real MiniLM WordPiece tokenizer, small random weights) from the
// queue named after it, and `microbatch serve --task <same> --queue` is a web replica holding only the folder's
// tokenizer. Embeddings equal transformers.js's feature-extraction pipeline, rerank scores and label probabilities
// equal transformers.js's own pipelines, within 1e-4; hostile bodies get the local server's 4xx, and nothing of
// them reaches the queue. The frameworks differ per broker, so all five serve a queue here; a `--config` fleet
// (`worker --config`, `serve --queue --config`) serves the three tasks side by side.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWorkerPool } from '@microbatch/inference';
import {
  type ChildHandle,
  type ServerProcess,
  startNatsServer,
  startProcess,
  startRedisServer,
  startServerProcess,
  waitFor,
} from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { referenceClassify, referenceScores } from '../../inference/test/helpers/transformers-classifier-reference.js';
import {
  DOCUMENTS,
  LABELS,
  QUERY,
  expectClose,
  post,
  runCli as run,
  writeEncoders,
} from './helpers/encoder-fixtures.js';
import { BIN, READY } from './helpers/serve-config.js';

// Hostile bodies: each answered by the replica itself, before its queue.
const HOSTILE: readonly { readonly path: string; readonly body: unknown }[] = [
  { path: '/v1/rerank', body: { query: QUERY, documents: Array.from({ length: 10_000 }, () => 'd') } },
  { path: '/v1/rerank', body: { query: '', documents: DOCUMENTS } },
  { path: '/v1/rerank', body: { query: QUERY, documents: DOCUMENTS, top_n: 0 } },
  { path: '/v1/rerank', body: { query: QUERY, documents: [1, 2] } },
  { path: '/v1/rerank', body: { query: QUERY, documents: ['x'.repeat(1_000_000)] } },
  { path: '/v1/score', body: { text_1: QUERY, text_2: Array.from({ length: 10_000 }, () => 'd') } },
];

let scratch: string;
let embedder: string;
let reranker: string;
let classifier: string;
let embeddings: number[][];
let scores: number[];
let probabilities: Record<string, number>[];
// The local server's answers to the hostile bodies: what a replica must answer too.
let localHostile: { status: number; message: string }[];

interface Broker {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

const BROKERS: Readonly<Record<string, () => Promise<Broker>>> = { redis: startRedisServer, nats: startNatsServer };
// Per broker: the framework each replica runs (all five over the two brokers).
const FRAMEWORKS: Readonly<Record<string, readonly [string, string, string]>> = {
  redis: ['express', 'koa', 'fastify'],
  nats: ['hono', 'nest', 'express'],
};

async function hostileAnswers(url: string): Promise<{ status: number; message: string }[]> {
  const answers = [];
  for (const { path, body } of HOSTILE) {
    const { status, json } = await post(url, path, body);
    answers.push({ status, message: String(json?.error?.message) });
  }
  return answers;
}

/** Waits until the replica's `/readyz` says 200: its queue is open and has heard a worker. */
async function whenReady(url: string): Promise<void> {
  let status = 0;
  const poll = setInterval(() => {
    void fetch(`${url}/readyz`).then(
      (response) => {
        status = response.status;
      },
      () => undefined,
    );
  }, 50);
  try {
    await waitFor(`${url} ready`, () => status === 200);
  } finally {
    clearInterval(poll);
  }
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-encoder-queue-'));
  ({ embedder, reranker, classifier } = await writeEncoders(scratch));
  scores = await referenceScores(reranker, QUERY, DOCUMENTS);
  probabilities = await referenceClassify(classifier, DOCUMENTS);
  const pool = createWorkerPool({
    runner: { task: 'feature-extraction', model: embedder, pooling: 'mean', normalize: true },
  });
  try {
    // One text per call: no padding at all in the reference.
    embeddings = [];
    for (const text of DOCUMENTS) embeddings.push((await pool.run([text]))[0] as number[]);
  } finally {
    await pool.close();
  }
  const local = await startServerProcess({
    args: [BIN, 'serve', '--task', 'rerank', '--model', reranker, '--port', '0', '--log-format', 'json'],
    env: { ...process.env },
    ready: READY,
  });
  try {
    localHostile = await hostileAnswers(local.url);
  } finally {
    await local.stop();
  }
}, 180_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe.each(Object.keys(BROKERS))('encoders over --queue %s', (brokerName) => {
  let broker: Broker;
  const workers: ChildHandle[] = [];
  const replicas: ServerProcess[] = [];
  const [embedApp, rerankApp, classifyApp] = FRAMEWORKS[brokerName] as readonly [string, string, string];
  const replicaOf = (task: string) => replicas[['feature-extraction', 'rerank', 'text-classification'].indexOf(task)]!;
  const workerOf = (task: string) => workers[['feature-extraction', 'rerank', 'text-classification'].indexOf(task)]!;
  const batchLines = (worker: ChildHandle) =>
    (worker.jsonLines() as { msg?: string }[]).filter((line) => line.msg === 'batch').length;

  beforeAll(async () => {
    broker = await (BROKERS[brokerName] as () => Promise<Broker>)();
    const models: readonly [string, string, string][] = [
      ['feature-extraction', embedder, embedApp],
      ['rerank', reranker, rerankApp],
      ['text-classification', classifier, classifyApp],
    ];
    for (const [task, model] of models) {
      workers.push(
        startProcess({
          args: [BIN, 'worker', '--task', task, '--queue', broker.url, '--model', model, '--log-format', 'json'],
          env: { ...process.env },
        }),
      );
    }
    await Promise.all(workers.map((worker) => worker.waitForOutput(/"msg":"worker ready"/, 120_000)));
    for (const [task, model, framework] of models) {
      const args = ['serve', '--task', task, '--queue', broker.url, '--model', model, '--framework', framework];
      replicas.push(
        await startServerProcess({
          args: [BIN, ...args, '--port', '0', '--log-format', 'json'],
          env: { ...process.env },
          ready: READY,
        }),
      );
    }
    await Promise.all(replicas.map((replica) => whenReady(replica.url)));
  }, 300_000);
  afterAll(async () => {
    await Promise.all([...replicas, ...workers].map((child) => child.stop()));
    await broker?.stop();
  });

  it("embeds as transformers.js's feature-extraction pipeline does (openai client, floats and base64)", async () => {
    const openai = new OpenAI({
      baseURL: `${replicaOf('feature-extraction').url}/v1`,
      apiKey: 'unused',
      maxRetries: 0,
    });
    const floats = await openai.embeddings.create({ model: 'tiny-minilm', input: DOCUMENTS, encoding_format: 'float' });
    expect(floats.model).toBe('tiny-minilm');
    floats.data.forEach((item, index) => expectClose(item.embedding, embeddings[index] as number[]));
    // The client's default: base64, decoded by the client to the same floats.
    const base64 = await openai.embeddings.create({ model: 'tiny-minilm', input: DOCUMENTS });
    base64.data.forEach((item, index) => expect(item.embedding).toEqual(floats.data[index]?.embedding));
    expect(floats.usage.prompt_tokens).toBeGreaterThan(DOCUMENTS.length);
    // The worker ran them (the replica has no graph).
    await waitFor('the worker ran them', () => batchLines(workerOf('feature-extraction')) > 0);
  }, 60_000);

  it("reranks and scores as transformers.js's cross-encoder does, concurrent requests alike", async () => {
    const url = replicaOf('rerank').url;
    const { status, json } = await post(url, '/v1/rerank', {
      model: 'tiny-cross-encoder',
      query: QUERY,
      documents: DOCUMENTS,
    });
    expect(status).toBe(200);
    const order = DOCUMENTS.map((_, index) => index).sort((a, b) => (scores[b] as number) - (scores[a] as number));
    expect(json.results.map((result: { index: number }) => result.index)).toEqual(order);
    expectClose(
      json.results.map((result: { relevance_score: number }) => result.relevance_score),
      order.map((index) => scores[index] as number),
    );
    expect(Math.max(...scores) - Math.min(...scores)).toBeGreaterThan(1e-3);
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, index) =>
        post(url, '/v1/score', { text_1: QUERY, text_2: DOCUMENTS.slice(index % 5) }),
      ),
    );
    answers.forEach((answer, index) => {
      expect(answer.status).toBe(200);
      expectClose(
        answer.json.data.map((item: { score: number }) => item.score),
        scores.slice(index % 5),
      );
    });
  }, 60_000);

  it("classifies as transformers.js's text-classification pipeline does", async () => {
    const { status, json } = await post(replicaOf('text-classification').url, '/classify', { input: DOCUMENTS });
    expect(status).toBe(200);
    json.data.forEach((item: { probs: number[]; label: string }, index: number) => {
      const expected = probabilities[index] as Record<string, number>;
      expectClose(
        item.probs,
        LABELS.map((label) => expected[label] as number),
      );
      expect(item.label).toBe(LABELS.reduce((a, b) => ((expected[a] as number) >= (expected[b] as number) ? a : b)));
    });
  }, 60_000);

  it('answers hostile bodies as the local server does, before anything is queued', async () => {
    const worker = workerOf('rerank');
    const before = batchLines(worker);
    const answers = await hostileAnswers(replicaOf('rerank').url);
    expect(answers).toEqual(localHostile);
    for (const answer of answers) expect([answer.status >= 400, answer.status < 500]).toEqual([true, true]);
    // 10,000 documents: refused naming the bound.
    expect(answers[0]?.message).toContain('1000');
    // Nothing reached the worker: one good request after them is the worker's only batch since (batch lines are
    // logged in order, so one of a hostile body's would come before it).
    const good = await post(replicaOf('rerank').url, '/v1/rerank', { query: QUERY, documents: [DOCUMENTS[0]] });
    expect(good.status).toBe(200);
    await waitFor('a batch for the good request', () => batchLines(worker) > before);
    expect(batchLines(worker)).toBe(before + 1);
  }, 60_000);

  it('serves the encoders of a --config file, each from the queue named after it', async () => {
    const config = join(scratch, `encoders-${brokerName}.yaml`);
    await writeFile(
      config,
      [
        // Three one-thread models, whatever this machine's cores.
        'maxThreads: 3',
        'models:',
        `  - { name: emb, path: ${embedder}, task: feature-extraction }`,
        `  - { name: rr, path: ${reranker}, task: rerank, maxBatchCost: 1024 }`,
        `  - { name: cls, path: ${classifier}, task: text-classification }`,
        '',
      ].join('\n'),
    );
    const fleetWorker = startProcess({
      args: [BIN, 'worker', '--queue', broker.url, '--config', config, '--log-format', 'json'],
      env: { ...process.env },
    });
    let fleetReplica: ServerProcess | undefined;
    try {
      for (const name of ['emb', 'rr', 'cls']) {
        await fleetWorker.waitForOutput(new RegExp(`"model":"${name}","msg":"worker ready"`), 120_000);
      }
      fleetReplica = await startServerProcess({
        args: [BIN, 'serve', '--queue', broker.url, '--config', config, '--port', '0', '--log-format', 'json'],
        env: { ...process.env },
        ready: READY,
      });
      await whenReady(fleetReplica.url);
      const openai = new OpenAI({ baseURL: `${fleetReplica.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const vectors = await openai.embeddings.create({ model: 'emb', input: DOCUMENTS, encoding_format: 'float' });
      expect(vectors.model).toBe('emb');
      vectors.data.forEach((item, index) => expectClose(item.embedding, embeddings[index] as number[]));
      const rerank = await post(fleetReplica.url, '/v1/rerank', { model: 'rr', query: QUERY, documents: DOCUMENTS });
      expect([rerank.status, rerank.json.model]).toEqual([200, 'rr']);
      const byIndex = rerank.json.results.toSorted((a: { index: number }, b: { index: number }) => a.index - b.index);
      expectClose(
        byIndex.map((result: { relevance_score: number }) => result.relevance_score),
        scores,
      );
      const classify = await post(fleetReplica.url, '/classify', { model: 'cls', input: DOCUMENTS });
      expect(classify.status).toBe(200);
      classify.json.data.forEach((item: { probs: number[] }, index: number) =>
        expectClose(
          item.probs,
          LABELS.map((label) => (probabilities[index] as Record<string, number>)[label] as number),
        ),
      );
      // A model of another task answers its own endpoints only, as a local multi-model server does.
      const wrong = await post(fleetReplica.url, '/v1/rerank', { model: 'emb', query: QUERY, documents: DOCUMENTS });
      expect(wrong.status).toBe(400);
      // Each model's items went to its own queue, run by its own worker there (its batch line comes after the answer).
      const ran = () => {
        const lines = fleetWorker.jsonLines() as { msg?: string; worker?: string; model?: string }[];
        const ready = lines.filter((line) => line.msg === 'worker ready');
        const modelOf = new Map(ready.map((line) => [line.worker, line.model]));
        return [...new Set(lines.filter((line) => line.msg === 'batch').map((line) => modelOf.get(line.worker)))];
      };
      await waitFor('a batch of every model', () => ran().length === 3);
      expect(ran().toSorted((a, b) => String(a).localeCompare(String(b)))).toEqual(['cls', 'emb', 'rr']);
    } finally {
      await Promise.all([fleetReplica?.stop(), fleetWorker.stop()]);
    }
  }, 240_000);

  it('refuses a replica flag its workers own, and a decoder flag on an encoder worker', async () => {
    const refusals: readonly (readonly [command: string, extra: readonly string[], message: string])[] = [
      [
        'serve',
        ['--max-batch-cost', '64'],
        'error: --max-batch-cost has no effect here: a web replica (--queue) runs no model',
      ],
      ['serve', ['--workers', '2'], 'error: --workers has no effect here: a web replica (--queue)'],
      ['worker', ['--max-sequences', '4'], 'error: --max-sequences does not apply to --task rerank'],
    ];
    for (const [command, extra, message] of refusals) {
      const refused = await run([command, '--task', 'rerank', '--queue', broker.url, '--model', reranker, ...extra]);
      expect(refused.stderr).toContain(message);
      expect(refused.code).toBe(1);
    }
    const wrongModel = await run(['worker', '--task', 'rerank', '--queue', broker.url, '--model', classifier]);
    expect(wrongModel.stderr).toContain('has 3 labels; a rerank model (cross-encoder) has one relevance logit');
    expect(wrongModel.code).toBe(1);
  }, 60_000);
});
