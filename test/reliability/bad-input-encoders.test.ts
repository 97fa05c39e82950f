// The encoder endpoints' hostile corpus (`bad-input-encoder-corpus.ts`) against `microbatch serve --task rerank` and
// `--task text-classification` on all five frameworks (a BERT-shaped classifier generated here from the real MiniLM
// tokenizer): every request is answered with its exact 4xx in OpenAI's shape naming the field, none carries a stack
// trace, and the server still answers afterwards.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../packages/inference/test/helpers/bert-encoder.js';
import { ENCODER_BAD_INPUTS } from './bad-input-encoder-corpus.js';
import { errorBody, leaksInternals, send } from './helpers/http.js';

const BIN = fileURLToPath(new URL('../../packages/cli/bin/microbatch.js', import.meta.url));

let scratch: string;
let models: Record<'rerank' | 'text-classification', string>;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-bad-encoders-'));
  models = {
    rerank: await writeBertEncoder(join(scratch, 'tiny-cross-encoder'), { hidden: 32, labels: ['LABEL_0'] }),
    'text-classification': await writeBertEncoder(join(scratch, 'tiny-classifier'), {
      hidden: 32,
      labels: ['no', 'yes'],
    }),
  };
});
afterAll(() => rm(scratch, { recursive: true, force: true }));

const post = (server: ServerProcess, path: string, body: string) =>
  send(server.url, path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    timeoutMs: 30_000,
  });

describe.each(['express', 'koa', 'fastify', 'hono', 'nest'])(
  'bad encoder inputs against microbatch serve (%s)',
  (framework) => {
    const servers: Partial<Record<'rerank' | 'text-classification', ServerProcess>> = {};
    beforeAll(async () => {
      for (const task of ['rerank', 'text-classification'] as const) {
        servers[task] = await startServerProcess({
          args: [BIN, 'serve', '--task', task, '--model', models[task], '--port', '0', '--framework', framework],
          env: { ...process.env },
          ready: /"url":"(http:[^"]+)","msg":"ready"/,
        });
      }
    });
    afterAll(async () => {
      await Promise.all(Object.values(servers).map((server) => server?.stop()));
    });

    it.each(ENCODER_BAD_INPUTS.map((row) => ({ ...row, label: `${row.path} ${row.name}` })))(
      '$label',
      async ({ task, path, body, status, code, field }) => {
        const outcome = await post(servers[task] as ServerProcess, path, body);
        expect(outcome.kind).toBe('answered');
        if (outcome.kind !== 'answered') return;
        const error = errorBody(outcome.answer.body);
        expect([outcome.answer.status, error?.code]).toEqual([status, code]);
        expect(leaksInternals(outcome.answer.body)).toBe(false);
        expect((error?.details as { field?: string } | undefined)?.field).toBe(field);
        // OpenAI's shape on every encoder path: `type`, and `param` naming the field (or null).
        expect(error).toMatchObject({ type: 'invalid_request_error', param: field ?? null });
        if (field !== undefined) expect(error?.message).toContain(field);
      },
    );

    it('still answers afterwards', async () => {
      const rerank = await post(
        servers.rerank as ServerProcess,
        '/v1/rerank',
        JSON.stringify({ query: 'q', documents: ['a', 'b'] }),
      );
      expect(rerank.kind === 'answered' && rerank.answer.status).toBe(200);
      const classify = await post(
        servers['text-classification'] as ServerProcess,
        '/classify',
        JSON.stringify({ input: ['a'] }),
      );
      expect(classify.kind === 'answered' && classify.answer.status).toBe(200);
    });
  },
);
