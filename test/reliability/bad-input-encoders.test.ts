// The encoder endpoints' hostile corpus (`bad-input-encoder-corpus.ts`) against every way `microbatch serve` serves
// them, on all five frameworks: `serve --task rerank` and `--task text-classification` (a server per task), and a
// multi-model server (`serve --config`: a cross-encoder and a classifier, each request routed by its `model`, a body
// without `model` going to the first model of the endpoint's task), with BERT-shaped encoders generated here from the
// real MiniLM tokenizer. Every request is answered with its exact 4xx (the same on both) in OpenAI's shape naming the
// field, none carries a stack trace, and the server still answers afterwards.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../packages/inference/test/helpers/bert-encoder.js';
import { ENCODER_BAD_INPUTS } from './bad-input-encoder-corpus.js';
import { send } from './helpers/http.js';
import { expectOpenAiRefusal } from './helpers/openai-refusal.js';

const BIN = fileURLToPath(new URL('../../packages/cli/bin/microbatch.js', import.meta.url));
const FRAMEWORKS = ['express', 'koa', 'fastify', 'hono', 'nest'];
type Task = 'rerank' | 'text-classification';

let scratch: string;
let models: Record<Task, string>;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-bad-encoders-'));
  models = {
    rerank: await writeBertEncoder(join(scratch, 'tiny-cross-encoder'), { hidden: 32, labels: ['LABEL_0'] }),
    'text-classification': await writeBertEncoder(join(scratch, 'tiny-classifier'), {
      hidden: 32,
      labels: ['no', 'yes'],
    }),
  };
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

const serve = (args: readonly string[]) =>
  startServerProcess({
    args: [BIN, 'serve', ...args, '--port', '0'],
    env: { ...process.env },
    ready: /"url":"(http:[^"]+)","msg":"ready"/,
  });

/** The servers a driver started: which answers each task, by which `model` name (none: the one-model servers). */
interface EncoderServers {
  readonly servers: Readonly<Record<Task, ServerProcess>>;
  readonly names: Readonly<Record<Task, string | undefined>>;
}

/** How each way of serving the encoders is started on a framework. */
const DRIVERS: Readonly<Record<string, (framework: string) => Promise<EncoderServers>>> = {
  'microbatch serve --task': async (framework) => {
    const rerank = await serve(['--task', 'rerank', '--model', models.rerank, '--framework', framework]);
    const classify = await serve([
      '--task',
      'text-classification',
      '--model',
      models['text-classification'],
      '--framework',
      framework,
    ]).catch(async (error: unknown) => {
      await rerank.stop();
      throw error;
    });
    return {
      servers: { rerank, 'text-classification': classify },
      names: { rerank: undefined, 'text-classification': undefined },
    };
  },
  'a multi-model server': async (framework) => {
    const config = join(scratch, `encoders-${framework}.yaml`);
    await writeFile(
      config,
      [
        'models:',
        `  - { name: rerank, path: ${models.rerank}, task: rerank }`,
        `  - { name: mood, path: ${models['text-classification']}, task: text-classification }`,
        '',
      ].join('\n'),
    );
    const server = await serve(['--config', config, '--framework', framework, '--max-threads', '2']);
    return {
      servers: { rerank: server, 'text-classification': server },
      names: { rerank: 'rerank', 'text-classification': 'mood' },
    };
  },
};

const post = (server: ServerProcess, path: string, body: string) =>
  send(server.url, path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    timeoutMs: 30_000,
  });

describe.each(Object.keys(DRIVERS).flatMap((driver) => FRAMEWORKS.map((framework) => [driver, framework])))(
  'bad encoder inputs against %s (%s)',
  (driver, framework) => {
    let started: EncoderServers | undefined;
    const server = (task: Task) => started?.servers[task] as ServerProcess;
    beforeAll(async () => {
      started = await (DRIVERS[driver] as (framework: string) => Promise<EncoderServers>)(framework);
    }, 120_000);
    afterAll(async () => {
      await Promise.all([...new Set(Object.values(started?.servers ?? {}))].map((one) => one.stop()));
    });

    it.each(ENCODER_BAD_INPUTS.map((row) => ({ ...row, label: `${row.path} ${row.name}` })))(
      '$label',
      async ({ task, path, body, status, code, field }) => {
        // OpenAI's shape on every encoder path: `type`, and `param` naming the field (or null).
        const error = expectOpenAiRefusal(await post(server(task), path, body), { status, code, field });
        if (field !== undefined) expect(error?.message).toContain(field);
      },
    );

    it('still answers afterwards (each model by name on the multi-model server)', async () => {
      const named = (task: Task, body: object) => {
        const model = started?.names[task];
        return JSON.stringify(model === undefined ? body : { model, ...body });
      };
      const rerank = await post(server('rerank'), '/v1/rerank', named('rerank', { query: 'q', documents: ['a', 'b'] }));
      expect(rerank.kind === 'answered' && rerank.answer.status).toBe(200);
      const classify = await post(
        server('text-classification'),
        '/classify',
        named('text-classification', { input: ['a'] }),
      );
      expect(classify.kind === 'answered' && classify.answer.status).toBe(200);
    });
  },
);
