// The encoders' queue sides in one process: `createEncoderWorker`'s handlers behind an in-memory queue whose items
// and answers go through JSON as on a broker, under `createQueuedSequenceClassifier` / `createQueuedEmbeddingService`.
// The answers equal the one-process services' exactly (the same graph, the same padding, float32 bytes on the wire);
// readiness follows the queue's workers; a worker's malformed answer and misuse are errors naming what is wrong.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBatcher } from '@microbatch/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';
import {
  type EncoderQueue,
  type EncoderWorker,
  createEmbeddingModel,
  createEncoderWorker,
  createQueuedEmbeddingService,
  createQueuedSequenceClassifier,
  createSequenceClassifier,
  floatsFromWire,
  floatsToWire,
} from '../src/index.js';

const TEXTS = ['Paris is the capital of France.', 'Hello', 'a b c d e f g h'];

/** A queue whose batchers run `handlers` here, every item and answer through JSON as a broker carries them. */
function memoryQueue(handlers: EncoderWorker['handlers'], state = { workersAlive: 1 }): EncoderQueue {
  return {
    ready: Promise.resolve(),
    batcher: <I, O>(name: string) =>
      createBatcher<I, O>(
        async (inputs) => {
          const handler = handlers[name];
          if (handler === undefined) throw new Error(`no handler ${name}`);
          const outputs = await handler(JSON.parse(JSON.stringify(inputs)) as never[], {} as never);
          return JSON.parse(JSON.stringify(outputs)) as O[];
        },
        { name, maxBatchSize: 64, maxQueueSize: 4096 },
      ),
    isConnected: () => true,
    snapshot: () => state,
    close: async () => undefined,
  };
}

let scratch: string;
let embedder: string;
let reranker: string;
let classifier: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-queued-encoders-'));
  embedder = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
  reranker = await writeBertEncoder(join(scratch, 'tiny-cross-encoder'), { hidden: 32, labels: ['LABEL_0'], seed: 3 });
  classifier = await writeBertEncoder(join(scratch, 'tiny-classifier'), {
    hidden: 32,
    labels: ['a', 'b', 'c'],
    seed: 5,
  });
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe('floats on the wire', () => {
  it('round-trips float32 values exactly, and refuses a vector of another length', () => {
    const values = Float32Array.of(0.1, -3.5e-20, 1e30, Number.MIN_VALUE, -0);
    expect(floatsFromWire(floatsToWire(values), 5)).toEqual(values);
    expect(() => floatsFromWire(floatsToWire(values), 4)).toThrow(
      "Expected a worker's embedding of 4 floats, got 20 bytes",
    );
    expect(() => floatsFromWire(undefined, 4)).toThrow('got 0 bytes');
  });
});

describe('queued encoders against the one-process services', () => {
  it('scores pairs as createSequenceClassifier does, and follows the workers for readiness', async () => {
    const worker = createEncoderWorker({ model: reranker, task: 'rerank' });
    const state = { workersAlive: 0 };
    const queued = createQueuedSequenceClassifier(memoryQueue(worker.handlers, state), {
      model: reranker,
      task: 'rerank',
    });
    const local = createSequenceClassifier({ model: reranker, task: 'rerank', log: false });
    try {
      await Promise.all([worker.ready, queued.ready, local.ready]);
      expect(queued.isReady()).toBe(false);
      state.workersAlive = 1;
      expect(queued.isReady()).toBe(true);
      const pairs = { pairs: TEXTS };
      const [{ items: remote }, { items: here }] = await Promise.all([
        queued.encodeAll(['query', 'query', 'query'], pairs),
        local.encodeAll(['query', 'query', 'query'], pairs),
      ]);
      expect(remote).toEqual(here);
      expect(await queued.scoreAll(remote)).toEqual(await local.scoreAll(here));
      expect([queued.id, queued.maxQueueSize, queued.labels]).toEqual(['tiny-cross-encoder', 1024, ['LABEL_0']]);
    } finally {
      await Promise.all([queued.close(), local.close(), worker.close()]);
    }
  }, 60_000);

  it('classifies and embeds as the one-process services do', async () => {
    const classifyWorker = createEncoderWorker({ model: classifier, task: 'text-classification' });
    const embedWorker = createEncoderWorker({ model: embedder, task: 'feature-extraction' });
    const classify = createQueuedSequenceClassifier(memoryQueue(classifyWorker.handlers), { model: classifier });
    const embed = createQueuedEmbeddingService(memoryQueue(embedWorker.handlers), { model: embedder });
    const localClassify = createSequenceClassifier({ model: classifier, log: false });
    const localEmbed = createEmbeddingModel({ model: embedder, log: false });
    try {
      await Promise.all([classifyWorker.ready, embedWorker.ready, classify.ready, embed.ready]);
      await Promise.all([localClassify.ready, localEmbed.ready]);
      const { items } = await classify.encodeAll(TEXTS);
      expect(await classify.classifyAll(items)).toEqual(await localClassify.classifyAll(items));
      const ids = await embed.encodeAll(TEXTS);
      expect(ids).toEqual(await localEmbed.encodeAll(TEXTS));
      expect([embed.pooling, embed.normalize, embed.dimensions]).toEqual(['mean', true, 32]);
      expect(await embed.embedAll(ids)).toEqual(await localEmbed.embedAll(ids));
      expect(embed.tokenize(TEXTS[1] as string)).toEqual(ids[1]);
    } finally {
      await Promise.all([classify.close(), embed.close(), localClassify.close(), localEmbed.close()]);
      await Promise.all([classifyWorker.close(), embedWorker.close()]);
    }
  }, 60_000);

  it('fails a request whose worker answers the wrong shape, naming what it got', async () => {
    const wrong = { rerank: async (items: unknown[]) => items.map(() => ({ logits: [1, 2] })) };
    const queued = createQueuedSequenceClassifier(memoryQueue(wrong), { model: reranker, task: 'rerank' });
    try {
      await queued.ready;
      const { items } = await queued.encodeAll(['q'], { pairs: ['d'] });
      await expect(queued.scoreAll(items)).rejects.toThrow("Expected a worker's 1 logits, got [1,2]");
    } finally {
      await queued.close();
    }
  }, 60_000);
});

describe('misuse', () => {
  it('names the option or the file that is wrong', () => {
    expect(() => createEncoderWorker({ model: reranker, task: 'rerank', maxBatchCost: 64 })).toThrow(
      "Expected `maxBatchCost` (64) to be at least the model's",
    );
    expect(() => createEncoderWorker({ model: classifier, task: 'rerank' })).toThrow(
      'has 3 labels; a rerank model (cross-encoder) has one relevance logit',
    );
    const queue = memoryQueue({});
    expect(() => createQueuedSequenceClassifier(queue, { model: reranker, maxLatencyMs: 100 })).toThrow(
      '`maxLatencyMs` needs a queue with `load()`',
    );
    expect(() => createQueuedEmbeddingService({} as never, { model: embedder })).toThrow(TypeError);
  });
});
