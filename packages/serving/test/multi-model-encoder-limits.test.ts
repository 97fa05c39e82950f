// The multi-model app's `encoderLimits` on a real cross-encoder (generated here, worker threads of this process):
// the bound set is the bound enforced on the model's rerank requests; a bound the model's queue could never admit is
// refused on each request with a 500 that does not show the internal message.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';
import { type RunningServer, createModelRegistry, createSequenceClassifier } from '../src/index.js';
import { startMultiModelApp } from '../src/app/express/index.js';

let scratch: string;
let reranker: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-multi-encoder-'));
  reranker = await writeBertEncoder(join(scratch, 'tiny-cross-encoder'), { hidden: 32, labels: ['LABEL_0'] });
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

async function start(maxDocuments: number): Promise<RunningServer> {
  const registry = createModelRegistry([
    {
      name: 'rerank',
      task: 'rerank',
      create: () =>
        createSequenceClassifier({ model: reranker, task: 'rerank', id: 'rerank', maxQueueSize: 8, log: false }),
    },
  ]);
  await registry.ready;
  return startMultiModelApp(registry, { port: 0, host: '127.0.0.1' }, { encoderLimits: { maxDocuments } });
}

async function rerank(server: RunningServer, documents: number): Promise<{ status: number; json: any }> {
  const res = await fetch(`${server.url}/v1/rerank`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'rerank',
      query: 'q',
      documents: Array.from({ length: documents }, (_, i) => `d${i}`),
    }),
  });
  return { status: res.status, json: await res.json() };
}

describe('createMultiModelApp encoderLimits', () => {
  it('bounds the documents of a rerank request as set', async () => {
    const server = await start(3);
    try {
      expect((await rerank(server, 3)).status).toBe(200);
      const over = await rerank(server, 4);
      expect(over.status).toBe(400);
      expect(over.json.error).toMatchObject({ param: 'documents' });
    } finally {
      await server.shutdown();
    }
  }, 60_000);

  it("refuses every request with a 500 when the bound exceeds the model's queue, hiding why", async () => {
    const server = await start(100);
    try {
      for (let attempt = 0; attempt < 2; attempt += 1) {
        const refused = await rerank(server, 2);
        expect(refused.status).toBe(500);
        expect(JSON.stringify(refused.json)).not.toContain('maxQueueSize');
      }
    } finally {
      await server.shutdown();
    }
  }, 60_000);
});
