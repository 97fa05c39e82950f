// API keys on the encoder apps (`microbatch serve --task rerank | text-classification --api-key`): the same guard as
// every other app, so a key given for a reranker is never silently ignored. Without the key or with a wrong one,
// 401 in OpenAI's shape with `WWW-Authenticate: Bearer`; with it, the answer; the probes stay open.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const KEY = 'sk-encoder-test-7d2e';

let scratch: string;
let reranker: string;
let classifier: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-encoder-keys-'));
  reranker = await writeBertEncoder(join(scratch, 'cross-encoder'), { hidden: 32, labels: ['LABEL_0'], seed: 3 });
  classifier = await writeBertEncoder(join(scratch, 'classifier'), { hidden: 32, labels: ['no', 'yes'], seed: 5 });
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

const CASES = [
  { task: 'rerank', model: () => reranker, path: '/v1/rerank', body: { query: 'batching', documents: ['a', 'b'] } },
  { task: 'text-classification', model: () => classifier, path: '/classify', body: { input: ['What a day'] } },
] as const;

describe.each(CASES)('microbatch serve --task $task --api-key', ({ task, model, path, body }) => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({
      args: [BIN, 'serve', '--task', task, '--model', model(), '--port', '0', '--api-key', KEY],
      env: { ...process.env },
      ready: READY,
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  const post = (authorization: string | undefined) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(authorization === undefined ? {} : { authorization }),
      },
      body: JSON.stringify(body),
    });

  it('refuses a request without the key, or with another, 401 in OpenAI shape', async () => {
    for (const authorization of [undefined, 'Bearer sk-wrong', `Basic ${KEY}`]) {
      const res = await post(authorization);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      const json = (await res.json()) as { error: { type: string; code: string } };
      expect(json.error).toMatchObject({ type: 'invalid_request_error', code: 'UNAUTHORIZED' });
      expect(JSON.stringify(json)).not.toContain(KEY);
    }
    const models = await fetch(`${server.url}/v1/models`);
    expect(models.status).toBe(401);
  });

  it('answers with the key; the probes need none', async () => {
    const res = await post(`Bearer ${KEY}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: unknown }).usage).toBeDefined();
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});
