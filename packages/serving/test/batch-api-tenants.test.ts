// The Files and Batch APIs with API keys: what one key creates exists for that key only. Another key gets 404 for
// its ids (get, content, delete, a batch's get and cancel), never sees them in lists, and cannot name another's file
// as a batch's input; the owner still sees and uses all of it. The same on all five frameworks (one shared handler).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/index.js';
import { startTextCompletionApp as startExpress } from '../src/app/express/index.js';
import { startTextCompletionApp as startFastify } from '../src/app/fastify/index.js';
import { startTextCompletionApp as startHono } from '../src/app/hono/index.js';
import { startTextCompletionApp as startKoa } from '../src/app/koa/index.js';
import { startTextCompletionApp as startNest } from '../src/app/nest/index.js';
import { fakeTextService, instantGenerate } from './fake-text-service.js';

const APPS = { express: startExpress, koa: startKoa, fastify: startFastify, hono: startHono, nest: startNest } as const;
const KEYS = [
  { name: 'team-a', key: 'sk-team-a-1111' },
  { name: 'team-b', key: 'sk-team-b-2222' },
];
let scratch: string;
let running: RunningServer | undefined;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-batch-tenants-'));
});
afterEach(async () => {
  running?.server.closeAllConnections();
  await running?.shutdown();
  running = undefined;
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe.each(Object.entries(APPS))('the Batch API scoped by API key (%s)', (framework, start) => {
  it("another key's files and batches do not exist for it; the owner's do", async () => {
    running = await start(
      fakeTextService(instantGenerate()),
      { port: 0, host: '127.0.0.1' },
      {
        apiKeys: KEYS,
        batchApi: { dataDir: join(scratch, framework) },
      },
    );
    const { url } = running;
    const as = (key: string, path: string, init: { method?: string; body?: FormData | string; json?: boolean } = {}) =>
      fetch(`${url}${path}`, {
        method: init.method ?? 'GET',
        ...(init.body === undefined ? {} : { body: init.body }),
        headers: {
          authorization: `Bearer ${key}`,
          ...(init.json === true ? { 'content-type': 'application/json' } : {}),
        },
      });
    const [a, b] = KEYS.map((entry) => entry.key) as [string, string];

    const line = { custom_id: 'one', method: 'POST', url: '/v1/completions', body: { model: 'fake', prompt: 'hi' } };
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([`${JSON.stringify(line)}\n`]), 'in.jsonl');
    const uploaded = await as(a, '/v1/files', { method: 'POST', body: form });
    expect(uploaded.status).toBe(200);
    const file = (await uploaded.json()) as { id: string };

    for (const path of [`/v1/files/${file.id}`, `/v1/files/${file.id}/content`]) {
      expect((await as(b, path)).status).toBe(404);
      expect((await as(a, path)).status).toBe(200);
    }
    const listedB = (await (await as(b, '/v1/files')).json()) as { data: { id: string }[] };
    expect(listedB.data.map((f) => f.id)).not.toContain(file.id);
    const listedA = (await (await as(a, '/v1/files')).json()) as { data: { id: string }[] };
    expect(listedA.data.map((f) => f.id)).toContain(file.id);

    const batchBody = { input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h' };
    const json = { method: 'POST', json: true };
    const stolen = await as(b, '/v1/batches', { ...json, body: JSON.stringify(batchBody) });
    expect(stolen.status).toBe(400);
    expect(((await stolen.json()) as { error: { param: string } }).error.param).toBe('input_file_id');

    const created = await as(a, '/v1/batches', { ...json, body: JSON.stringify(batchBody) });
    expect(created.status).toBe(200);
    const batch = (await created.json()) as { id: string };
    expect((await as(b, `/v1/batches/${batch.id}`)).status).toBe(404);
    expect((await as(b, `/v1/batches/${batch.id}/cancel`, { method: 'POST' })).status).toBe(404);
    const batchesB = (await (await as(b, '/v1/batches')).json()) as { data: { id: string }[] };
    expect(batchesB.data.map((x) => x.id)).not.toContain(batch.id);
    expect((await as(a, `/v1/batches/${batch.id}`)).status).toBe(200);
    const batchesA = (await (await as(a, '/v1/batches')).json()) as { data: { id: string }[] };
    expect(batchesA.data.map((x) => x.id)).toContain(batch.id);

    expect((await as(b, `/v1/files/${file.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await as(a, `/v1/files/${file.id}`)).status).toBe(200);
  });
});
