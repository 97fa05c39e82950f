// `microbatch serve --config FILE` against real processes and the official `openai` client: one server, a text
// generator, an embedder and a second generator (the bundled tinystories model under two names, and an encoder
// generated here), each request routed by its `model`; multiplexing two generators with `--max-loaded-models 1`;
// bad config files refused at start-up, naming the problem.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';
import { BIN, STORIES, configFile as writeConfig, modelMetric, serveConfig } from './helpers/serve-config.js';

let scratch: string;
let encoder: string;

const configFile = (name: string, text: string): Promise<string> => writeConfig(scratch, name, text);

function run(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

const client = (server: ServerProcess) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });

/** The server process's resident memory, in MiB (Linux). */
function rssMb(server: ServerProcess): number {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
  return kb / 1024;
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-models-'));
  encoder = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe.each(['express', 'nest'])('one server, three models (%s)', (framework) => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    const config = await configFile(
      `three-${framework}.yaml`,
      [
        'models:',
        `  - { name: story-a, path: ${STORIES}, task: text-generation }`,
        `  - { name: embedder, path: ${encoder}, task: feature-extraction }`,
        `  - { name: story-b, path: ${STORIES}, task: text-generation, load: lazy, maxSequences: 4 }`,
        '',
      ].join('\n'),
    );
    server = await serveConfig(config, ['--framework', framework, '--max-threads', '3']);
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  it('logs the thread plan at start-up', () => {
    const start = server.jsonLines().find((line) => (line as { maxThreads?: number }).maxThreads !== undefined) as {
      maxThreads: number;
      threadsAtPeak: number;
      msg: string;
    };
    expect(start).toMatchObject({ maxThreads: 3, threadsAtPeak: 3 });
    expect(start.msg).toContain('story-a 1x1=1, embedder 1x1=1, story-b 1x1=1');
  });

  it('answers each endpoint for the model named, and lists all three with their state', async () => {
    const before = await openai.models.list();
    expect(before.data.map((model) => model.id)).toEqual(['story-a', 'embedder', 'story-b']);
    expect(before.data.map((model) => (model as unknown as { loaded: boolean }).loaded)).toEqual([true, true, false]);
    expect(before.data.every((model) => model.owned_by === 'microbatch')).toBe(true);

    const completion = await openai.completions.create({ model: 'story-a', prompt: 'Once upon a time', max_tokens: 6 });
    expect(completion.model).toBe('story-a');
    expect(completion.usage?.completion_tokens).toBe(6);
    const chat = await openai.chat.completions.create({
      model: 'story-b',
      messages: [{ role: 'user', content: 'Tell me a story' }],
      max_tokens: 5,
    });
    expect(chat.model).toBe('story-b');
    expect(chat.choices[0]?.message.content?.length).toBeGreaterThan(0);
    const embedding = await openai.embeddings.create({ model: 'embedder', input: ['hello', 'world'] });
    expect(embedding.model).toBe('embedder');
    expect(embedding.data.map((item) => item.embedding.length)).toEqual([32, 32]);

    const after = await openai.models.list();
    expect(after.data.map((model) => (model as unknown as { loaded: boolean }).loaded)).toEqual([true, true, true]);
    // Per-model series: the same batcher name under each model's label.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/microbatch_batches_total\{name="generate",model="story-a"\} 1/);
    expect(metrics).toMatch(/microbatch_batches_total\{name="embed",model="embedder"\} [1-9]/);
    expect(await modelMetric(server, 'microbatch_model_loads_total', 'story-b')).toBe(1);
  });

  it('answers an unknown model 404 model_not_found and a model of another task 400 naming both', async () => {
    const unknown = await openai.completions.create({ model: 'gpt-9', prompt: 'x', max_tokens: 1 }).catch((e) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    const asEmbedder = await openai.embeddings.create({ model: 'story-a', input: 'x' }).catch((e) => e);
    expect(asEmbedder).toBeInstanceOf(OpenAI.BadRequestError);
    expect((asEmbedder as Error).message).toContain(
      'The model "story-a" is a text-generation model; /v1/embeddings serves feature-extraction models',
    );
    const asGenerator = await openai.chat.completions
      .create({ model: 'embedder', messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(asGenerator).toBeInstanceOf(OpenAI.BadRequestError);
    expect((asGenerator as Error).message).toContain('"embedder" is a feature-extraction model');
    const post = (body: unknown) =>
      fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const notString = await post({ model: 5, prompt: 'x' });
    expect(notString.status).toBe(400);
    expect(((await notString.json()) as { error: { param: string } }).error.param).toBe('model');
    // Without `model`, the first model of the endpoint's task answers, as a one-model server would.
    const absent = await post({ prompt: 'x', max_tokens: 1 });
    expect(absent.status).toBe(200);
    expect(((await absent.json()) as { model: string }).model).toBe('story-a');
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });
});

describe('--max-loaded-models 1 with two generators', () => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    const config = await configFile(
      'two.json',
      JSON.stringify({
        models: [
          { name: 'story-a', path: STORIES, task: 'text-generation' },
          { name: 'story-b', path: STORIES, task: 'text-generation' },
        ],
      }),
    );
    server = await serveConfig(config, ['--max-loaded-models', '1']);
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  const complete = (model: string) =>
    openai.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });

  it('serves alternating requests, loading and unloading as they alternate, memory returned', async () => {
    const metric = (name: string, model: string) => modelMetric(server, `microbatch_model_${name}`, model);
    expect(await metric('loaded', 'story-a')).toBe(0);
    const first = await complete('story-a');
    const baseline = rssMb(server);
    const answers = new Map<string, string>([['story-a', first.choices[0]?.text ?? '']]);
    const order = ['story-b', 'story-a', 'story-b', 'story-a', 'story-b'];
    for (const model of order) {
      const answer = await complete(model);
      expect(answer.model).toBe(model);
      // Greedy: the same model folder answers the same text whichever name loaded it.
      answers.set(model, answer.choices[0]?.text ?? '');
      expect(await metric('loaded', model)).toBe(1);
    }
    expect(answers.get('story-a')).toBe(answers.get('story-b'));
    expect(await metric('loads_total', 'story-a')).toBe(3);
    expect(await metric('loads_total', 'story-b')).toBe(3);
    expect(await metric('unloads_total', 'story-a')).toBe(3);
    expect(await metric('unloads_total', 'story-b')).toBe(2);
    expect(await metric('loaded', 'story-a')).toBe(0);
    const after = rssMb(server);
    console.log(`RSS one model loaded: ${baseline.toFixed(1)} MiB; after 6 switches: ${after.toFixed(1)} MiB`);
    expect(after).toBeLessThan(baseline * 1.2);
  }, 120_000);

  it('fails no request while concurrent clients on both models force switches', async () => {
    const before = (await metric2('story-a')) + (await metric2('story-b'));
    const clients = ['story-a', 'story-b', 'story-a', 'story-b'].map(async (model) => {
      const got: string[] = [];
      for (let index = 0; index < 4; index += 1) got.push((await complete(model)).model);
      return got;
    });
    const results = await Promise.all(clients);
    expect(results).toEqual([
      Array(4).fill('story-a'),
      Array(4).fill('story-b'),
      Array(4).fill('story-a'),
      Array(4).fill('story-b'),
    ]);
    // Both models served while only one may be loaded: at least one switch happened.
    const loads = (await metric2('story-a')) + (await metric2('story-b'));
    expect(loads).toBeGreaterThan(before);
  }, 120_000);

  it('keeps a model loaded while its stream runs: another model waits for the stream to end', async () => {
    await complete('story-a');
    const unloadsBefore = await modelCounter('unloads_total', 'story-a');
    const stream = fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'story-a', prompt: 'Once upon a time', max_tokens: 120, stream: true }),
    });
    const response = await stream;
    expect(response.status).toBe(200);
    // story-b needs story-a's place; it is asked for while story-a's stream is running.
    const other = complete('story-b');
    const events = await response.text();
    expect(events.trimEnd().endsWith('data: [DONE]')).toBe(true);
    // Sampled (the request sets no temperature): the story may end (`stop`) before 120 tokens; either way it finished.
    expect(events).toMatch(/"finish_reason":"(length|stop)"/);
    expect((await other).model).toBe('story-b');
    expect(await modelCounter('unloads_total', 'story-a')).toBe(unloadsBefore + 1);
  }, 120_000);

  const modelCounter = (name: string, model: string) => modelMetric(server, `microbatch_model_${name}`, model);
  const metric2 = (model: string) => modelMetric(server, 'microbatch_model_loads_total', model);
});

describe('bad config files are refused at start-up, naming the problem', () => {
  const cases: ReadonlyArray<readonly [string, string, readonly string[], string]> = [
    [
      'unknown key',
      `models:\n  - name: a\n    path: ${STORIES}\n    task: text-generation\n    maxSequence: 4\n`,
      [],
      ':5: models[0].maxSequence: unknown model key `maxSequence`',
    ],
    [
      'missing path key',
      'models:\n  - name: a\n    task: text-generation\n',
      [],
      ':2: models[0]: the model key `path` is missing',
    ],
    [
      'path not there',
      `models:\n  - { name: a, path: ${join('/nonexistent', 'model')}, task: text-generation }\n`,
      [],
      'models[0].path (a): Model directory not found: /nonexistent/model',
    ],
    [
      'duplicate names',
      `models:\n  - { name: a, path: ${STORIES}, task: text-generation }\n  - { name: a, path: ${STORIES}, task: text-generation }\n`,
      [],
      ':3: models[1].name: duplicate model name "a" (models[0] has it)',
    ],
    [
      'bad task',
      `models:\n  - name: a\n    path: ${STORIES}\n    task: translation\n`,
      [],
      ':4: models[0].task: must be one of text-generation, feature-extraction, rerank, text-classification, got "translation"',
    ],
    [
      'a key of another task',
      `models:\n  - { name: a, path: ${STORIES}, task: text-generation, pooling: mean }\n`,
      [],
      'models[0].pooling: `pooling` does not apply to task text-generation',
    ],
    [
      'thread over-commit',
      `models:\n  - { name: a, path: ${STORIES}, task: text-generation, workers: 2, threads: 2 }\n  - { name: b, path: ${STORIES}, task: text-generation }\n`,
      ['--max-threads', '4'],
      'thread over-commit: the models need 5 of 4 threads: a 2x2=4, b 1x1=1',
    ],
    ['not YAML', 'models: [\n', [], ':2: not valid YAML or JSON'],
  ];

  it.each(cases)('%s', async (_name, text, extra, message) => {
    const file = await configFile(`bad-${_name.replaceAll(' ', '-')}.yaml`, text);
    const { code, stdout, stderr } = await run(['serve', '--config', file, '--port', '0', ...extra]);
    expect(code).toBe(1);
    expect(stderr).toContain(message);
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(stdout).not.toContain('"msg":"ready"');
  });

  it('refuses a model flag beside --config, naming it', async () => {
    const file = await configFile('ok.yaml', `models:\n  - { name: a, path: ${STORIES}, task: text-generation }\n`);
    const { code, stderr } = await run(['serve', '--config', file, '--workers', '2']);
    expect(code).toBe(1);
    expect(stderr).toContain('error: --workers does not apply with --config: set it per model in the file');
    const alone = await run(['serve', '--max-loaded-models', '1', '--model', STORIES]);
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain('error: --max-loaded-models applies with --config only');
  });
});
