// The encoder endpoints' hostile corpus (`bad-input-encoder-corpus.ts`) against a multi-model server
// (`microbatch serve --config`: a cross-encoder and a classifier, each request routed by its `model`, a body without
// `model` going to the first model of the endpoint's task) on Express, Koa, Fastify, Hono and Nest: every request is
// answered with the exact 4xx a one-model `serve --task` gives, in OpenAI's shape naming the field, none carries a
// stack trace, and the server still answers afterwards.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
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
let config: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-bad-models-encoders-'));
  const reranker = await writeBertEncoder(join(scratch, 'tiny-cross-encoder'), { hidden: 32, labels: ['LABEL_0'] });
  const classifier = await writeBertEncoder(join(scratch, 'tiny-classifier'), { hidden: 32, labels: ['no', 'yes'] });
  config = join(scratch, 'encoders.yaml');
  await writeFile(
    config,
    [
      'models:',
      `  - { name: rerank, path: ${reranker}, task: rerank }`,
      `  - { name: mood, path: ${classifier}, task: text-classification }`,
      '',
    ].join('\n'),
  );
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

const post = (server: ServerProcess, path: string, body: string) =>
  send(server.url, path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    timeoutMs: 30_000,
  });

describe.each(['express', 'koa', 'fastify', 'hono', 'nest'])(
  'bad encoder inputs against a multi-model server (%s)',
  (framework) => {
    let server: ServerProcess;
    beforeAll(async () => {
      server = await startServerProcess({
        args: [BIN, 'serve', '--config', config, '--port', '0', '--framework', framework, '--max-threads', '2'],
        env: { ...process.env },
        ready: /"url":"(http:[^"]+)","msg":"ready"/,
      });
    }, 120_000);
    afterAll(() => server?.stop());

    it.each(ENCODER_BAD_INPUTS.map((row) => ({ ...row, label: `${row.path} ${row.name}` })))(
      '$label',
      async ({ path, body, status, code, field }) => {
        const outcome = await post(server, path, body);
        expect(outcome.kind).toBe('answered');
        if (outcome.kind !== 'answered') return;
        const error = errorBody(outcome.answer.body);
        expect([outcome.answer.status, error?.code]).toEqual([status, code]);
        expect(leaksInternals(outcome.answer.body)).toBe(false);
        expect((error?.details as { field?: string } | undefined)?.field).toBe(field);
        expect(error).toMatchObject({ type: 'invalid_request_error', param: field ?? null });
        if (field !== undefined) expect(error?.message).toContain(field);
      },
    );

    it('still answers afterwards, each model by name', async () => {
      const rerank = await post(
        server,
        '/v1/rerank',
        JSON.stringify({ model: 'rerank', query: 'q', documents: ['a'] }),
      );
      expect(rerank.kind === 'answered' && rerank.answer.status).toBe(200);
      const classify = await post(server, '/classify', JSON.stringify({ model: 'mood', input: ['a'] }));
      expect(classify.kind === 'answered' && classify.answer.status).toBe(200);
    });
  },
);
