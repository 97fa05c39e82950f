// The bad-input corpus's OpenAI requests (bad, odd but valid, broken HTTP) against a multi-model server
// (`microbatch serve --config`: a text generator and an embedder, each request routed by its `model`) on Express,
// Koa, Fastify, Hono and Nest: every bad input answered with the exact 4xx a one-model server gives (the first
// text-generation model answers a body without `model`), no body carrying a stack trace, the same answer on every
// framework, and each server healthy afterwards.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../packages/inference/test/helpers/bert-encoder.js';
import { BAD_INPUTS, type CorpusRequest, EDGE_INPUTS, IGNORED_INPUTS, PROTOCOL_INPUTS } from './bad-input-corpus.js';
import { errorBody, leaksInternals, postJson, send, sendRaw } from './helpers/http.js';

const BIN = fileURLToPath(new URL('../../packages/cli/bin/microbatch.js', import.meta.url));
const STORIES = fileURLToPath(new URL('../../models/tinystories-656k', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const FRAMEWORKS = ['express', 'koa', 'fastify', 'hono', 'nest'] as const;
// The routes a multi-model app serves: the corpus's `GET /?text=` cases are the one-model app's alone.
const CASES = BAD_INPUTS.filter((input) => input.request.path.startsWith('/v1/'));
const ODD = [...EDGE_INPUTS, ...IGNORED_INPUTS].filter((input) => input.request.path.startsWith('/v1/'));

let scratch: string;
let config: string;
/** Per case name: each framework's `status code param`, to compare across frameworks. */
const answers = new Map<string, Map<string, string>>();

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-bad-models-'));
  const encoder = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
  config = join(scratch, 'models.yaml');
  await writeFile(
    config,
    [
      'models:',
      `  - { name: story, path: ${STORIES}, task: text-generation }`,
      `  - { name: embedder, path: ${encoder}, task: feature-extraction }`,
      '',
    ].join('\n'),
  );
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe.each(FRAMEWORKS)('the bad-input corpus against a multi-model server (%s)', (framework) => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({
      args: [BIN, 'serve', '--config', config, '--port', '0', '--log-format', 'json', '--max-threads', '2'],
      env: { ...process.env },
      ready: READY,
    });
  }, 120_000);
  afterAll(() => server?.stop());

  const sendCase = (request: CorpusRequest) =>
    send(server.url, request.path, {
      method: request.method,
      ...(request.headers === undefined ? {} : { headers: request.headers }),
      ...(request.body === undefined ? {} : { body: request.body }),
      timeoutMs: 30_000,
    });

  it.each(CASES.map((input) => [`${input.group}: ${input.name}`, input] as const))('%s', async (name, input) => {
    const outcome = await sendCase(input.request);
    expect(outcome.kind).toBe('answered');
    if (outcome.kind !== 'answered') return;
    const error = errorBody(outcome.answer.body) as { code?: string; param?: unknown; details?: { field?: unknown } };
    const seen = `${outcome.answer.status} ${String(error?.code)} ${String(error?.param)}`;
    const perFramework = answers.get(name) ?? new Map<string, string>();
    perFramework.set(framework, seen);
    answers.set(name, perFramework);
    expect(leaksInternals(outcome.answer.body)).toBe(false);
    expect([outcome.answer.status, error?.code]).toEqual([input.status, input.code]);
    if (input.field !== undefined) expect(error?.details?.field).toBe(input.field);
  });

  it.each(ODD.map((input) => [`${input.group}: ${input.name}`, input] as const))(
    'odd but valid, %s: an allowed status, never 5xx, no leak',
    async (name, input) => {
      const outcome = await sendCase(input.request);
      expect(outcome.kind).toBe('answered');
      if (outcome.kind !== 'answered') return;
      const { status, body } = outcome.answer;
      const perFramework = answers.get(name) ?? new Map<string, string>();
      perFramework.set(framework, String(status));
      answers.set(name, perFramework);
      expect(input.allowed).toContain(status);
      expect(leaksInternals(body)).toBe(false);
      if (status >= 400) expect(errorBody(body)).toBeDefined();
      else if (input.check !== undefined) expect(input.check(body)).toBeUndefined();
      else expect((JSON.parse(body) as { object?: string }).object).toBe('text_completion');
    },
  );

  it.each(PROTOCOL_INPUTS.map((input) => [input.name, input] as const))(
    'broken HTTP, %s: its 4xx, no stack trace',
    async (name, input) => {
      const raw = await sendRaw(server.url, input.bytes);
      const perFramework = answers.get(`protocol: ${name}`) ?? new Map<string, string>();
      perFramework.set(framework, String(raw.status));
      answers.set(`protocol: ${name}`, perFramework);
      expect(raw.status).toBe(input.status);
      expect(leaksInternals(raw.body)).toBe(false);
    },
  );

  it('is healthy afterwards: both models answer, nothing on stderr', async () => {
    const completion = await postJson(server.url, '/v1/completions', { model: 'story', prompt: 'Once', max_tokens: 2 });
    const embedding = await postJson(server.url, '/v1/embeddings', { model: 'embedder', input: 'hi' });
    expect(completion.kind === 'answered' && completion.answer.status).toBe(200);
    expect(embedding.kind === 'answered' && embedding.answer.status).toBe(200);
    expect(server.exitInfo()).toBeUndefined();
    expect(server.stderr()).toBe('');
  });
});

describe('across the frameworks', () => {
  it('every case got the same status, code and param on all five', () => {
    const disagreements = [...answers].filter(([, seen]) => new Set(seen.values()).size > 1);
    console.log(
      `bad-input corpus on a multi-model server: ${answers.size} cases (${CASES.length} bad, ${ODD.length} odd, ` +
        `${PROTOCOL_INPUTS.length} protocol) x ${FRAMEWORKS.length} frameworks, ` +
        `${disagreements.length} disagreements`,
    );
    expect(answers.size).toBe(CASES.length + ODD.length + PROTOCOL_INPUTS.length);
    expect([...answers.values()].every((seen) => seen.size === FRAMEWORKS.length)).toBe(true);
    expect(disagreements).toEqual([]);
  });
});
