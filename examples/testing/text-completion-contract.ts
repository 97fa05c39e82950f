// What every text-completion example (Express, Koa, Nest) must do, tested once against each of them on the real
// bundled model: the tutorial's GET, the OpenAI completions API (JSON and SSE), validation, health, and draining.
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel } from '@microbatch/serving';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseSse } from '@microbatch/test-kit';
import { startChild, warmClient } from './child-server.js';

/** An example app serving a given model on a free port. */
export interface AppUnderTest {
  readonly url: string;
  /** Closes the app and the model. */
  close(): Promise<void>;
}

const MODEL_ID = 'tinystories-656k';
const json = (body: unknown): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

/** OpenAI's `text_completion` as this server sends it (no logprobs), for exact comparisons. */
function completionShape(choices: unknown[], usage?: unknown): Record<string, unknown> {
  return {
    id: expect.stringMatching(/^cmpl-[0-9a-f]{24}$/),
    object: 'text_completion',
    created: expect.any(Number),
    model: MODEL_ID,
    choices,
    ...(usage === undefined ? {} : { usage }),
  };
}

const choice = (index: number, finish: unknown = expect.stringMatching(/^(stop|length)$/)) => ({
  text: expect.any(String),
  index,
  logprobs: null,
  finish_reason: finish,
});

async function complete(url: string, body: Record<string, unknown>) {
  const response = await fetch(`${url}/v1/completions`, json(body));
  expect(response.status).toBe(200);
  return (await response.json()) as {
    choices: { text: string; finish_reason: string }[];
    usage: Record<string, number>;
  };
}

/** Bodies that must be answered 400 naming the field, without reaching the model. */
const BAD_BODIES: ReadonlyArray<readonly [string, unknown, Record<string, unknown>]> = [
  ['an empty prompt', { prompt: '' }, { field: 'prompt' }],
  ['a missing prompt', { max_tokens: 5 }, { field: 'prompt' }],
  ['a numeric prompt', { prompt: 42 }, { field: 'prompt' }],
  ['a prompt over 4000 characters', { prompt: 'a'.repeat(4001) }, { field: 'prompt' }],
  ['a prompt longer than the model context', { prompt: 'Once upon a time '.repeat(150) }, { field: 'prompt' }],
  [
    'a prompt that leaves no room for max_tokens',
    { prompt: 'Once upon a time '.repeat(70), max_tokens: 256 },
    { field: 'max_tokens' },
  ],
  ['max_tokens 0', { prompt: 'Hi ', max_tokens: 0 }, { field: 'max_tokens' }],
  ['max_tokens over 256', { prompt: 'Hi ', max_tokens: 257 }, { field: 'max_tokens' }],
  ['max_tokens as a string', { prompt: 'Hi ', max_tokens: '5' }, { field: 'max_tokens' }],
  ['temperature over 2', { prompt: 'Hi ', temperature: 3 }, { field: 'temperature' }],
  ['top_p as a string', { prompt: 'Hi ', top_p: 'high' }, { field: 'top_p' }],
  ['stop as a number', { prompt: 'Hi ', stop: 5 }, { field: 'stop' }],
  ['stream as a string', { prompt: 'Hi ', stream: 'yes' }, { field: 'stream' }],
  ['model as a number', { prompt: 'Hi ', model: 5 }, { field: 'model' }],
  ['n of 2', { prompt: 'Hi ', n: 2 }, { field: 'n' }],
  ['17 prompts', { prompt: Array.from({ length: 17 }, () => 'Hi ') }, { field: 'prompt' }],
  ['an empty prompt array', { prompt: [] }, { field: 'prompt' }],
  ['a number in the prompt array', { prompt: ['Hi ', 5] }, { field: 'prompt', index: 1 }],
  ['an empty string in the prompt array', { prompt: ['Hi ', ''] }, { field: 'prompt', index: 1 }],
  ['a JSON array body', ['Hi '], { field: 'body' }],
];

/**
 * Registers the contract tests of one text-completion example. `serve` starts its app on a given model (port 0);
 * `cwd` is the example's folder, whose `src/main.ts` is started as a child process for the shutdown test.
 */
export function describeTextCompletionApp(
  framework: string,
  cwd: string,
  serve: (model: TextCompletionModel) => Promise<AppUnderTest>,
): void {
  describe(`${framework} text completion`, () => {
    const lines: string[] = [];
    let model: TextCompletionModel;
    let app: AppUnderTest;

    beforeAll(async () => {
      model = createTextCompletionModel({ model: bundledModelDir(), log: (line) => lines.push(line) });
      app = await serve(model);
      await model.ready;
    });
    afterAll(() => app?.close());

    it("answers the tutorial's GET /?text= with the prompt and its greedy completion as plain text", async () => {
      const response = await fetch(`${app.url}/?text=Once+upon+a+time`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
      // Continuous scheduling: the decode-loop step it shared with the most others (alone here), not the batcher's.
      expect([response.headers.get('x-batch-id'), response.headers.get('x-batch-size')]).toEqual([
        expect.stringMatching(/^w0-[0-9a-f]{4}:\d+$/),
        '1',
      ]);
      const story = await response.text();
      const { choices } = await complete(app.url, { prompt: 'Once upon a time ', max_tokens: 64, temperature: 0 });
      expect(story).toBe(`Once upon a time ${choices[0]?.text}`);
      expect(choices[0]?.text.length).toBeGreaterThan(0);
    });

    it('answers POST /v1/completions in OpenAI’s shape, logging the decode loop’s activity', async () => {
      lines.length = 0;
      const body = await complete(app.url, { model: 'any', prompt: 'Once upon a time ', max_tokens: 5 });
      expect(body).toEqual(
        completionShape([choice(0)], {
          prompt_tokens: 6,
          completion_tokens: expect.any(Number),
          total_tokens: expect.any(Number),
          // The prefix cache is on by default; a prompt shorter than its 16-token blocks reuses none.
          prompt_tokens_details: { cached_tokens: 0 },
        }),
      );
      expect(body.usage.completion_tokens).toBeLessThanOrEqual(5);
      expect(body.usage.total_tokens).toBe(6 + (body.usage.completion_tokens ?? 0));
      // Continuous scheduling: the loop's line (at most one a second), not the batcher's single-request batches.
      await vi.waitFor(() => expect(lines.length).toBeGreaterThan(0), { timeout: 10_000 });
      for (const line of lines) {
        expect(line).toMatch(
          /^\[inference\] decode loop, last [\d.]+ s: \d+ steps, [\d.]+ rows per step \(max \d\), \d+ tokens\/s, \d+ joined, \d+ left(, prefix cache \d+\/\d+ hits, \d+ tokens reused)?$/,
        );
      }
    });

    it('batches a prompt array as one item per prompt and answers with indexed choices', async () => {
      const prompts = ['Once upon a time ', 'The little dog ', 'One day, '];
      const alone = await Promise.all(
        prompts.map((prompt) => complete(app.url, { prompt, max_tokens: 8, temperature: 0 })),
      );
      const before = model.generate.stats().itemsProcessed;
      const together = await complete(app.url, { prompt: prompts, max_tokens: 8, temperature: 0 });
      expect(model.generate.stats().itemsProcessed - before).toBe(3);
      expect(together.choices).toEqual(alone.map((single, index) => ({ ...single.choices[0], index })));
      const sum = (key: string) => alone.reduce((total, single) => total + (single.usage[key] ?? 0), 0);
      expect(together.usage).toEqual({
        prompt_tokens: sum('prompt_tokens'),
        completion_tokens: sum('completion_tokens'),
        total_tokens: sum('total_tokens'),
        prompt_tokens_details: { cached_tokens: 0 },
      });
    });

    it('streams OpenAI chunks over SSE that add up to the same completion, then [DONE]', async () => {
      const request = { prompt: 'Once upon a time ', max_tokens: 12, temperature: 0 };
      const { choices } = await complete(app.url, request);
      const response = await fetch(`${app.url}/v1/completions`, json({ ...request, stream: true }));
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      // Sent with the first token: the decode-loop step that batched it so far (alone here).
      expect([response.headers.get('x-batch-id'), response.headers.get('x-batch-size')]).toEqual([
        expect.stringMatching(/^w0-[0-9a-f]{4}:\d+$/),
        '1',
      ]);
      const events = parseSse(await response.text());
      expect(events.at(-1)?.data).toBe('[DONE]');
      const chunks = events
        .slice(0, -1)
        .map((event) => JSON.parse(event.data) as { id: string; choices: { text: string }[] });
      chunks.forEach((chunk, i) => {
        const finish = i === chunks.length - 1 ? choices[0]?.finish_reason : null;
        expect(chunk).toEqual(completionShape([choice(0, finish)]));
        expect(chunk.id).toBe(chunks[0]?.id);
      });
      expect(chunks.map((chunk) => chunk.choices[0]?.text).join('')).toBe(choices[0]?.text);
    });

    it('streams several prompts interleaved by index, with the usage chunk when asked for', async () => {
      const body = {
        prompt: ['Once upon a time ', 'The cat '],
        max_tokens: 4,
        stream: true,
        stream_options: { include_usage: true },
      };
      const events = parseSse(await (await fetch(`${app.url}/v1/completions`, json(body))).text());
      const chunks = events
        .slice(0, -1)
        .map(
          (event) =>
            JSON.parse(event.data) as { choices: { index: number; finish_reason: unknown }[]; usage?: unknown },
        );
      const finished = chunks.flatMap((chunk) =>
        chunk.choices.filter((c) => c.finish_reason !== null).map((c) => c.index),
      );
      expect(finished.sort((a, b) => a - b)).toEqual([0, 1]);
      expect(chunks.at(-1)).toEqual(
        completionShape([], {
          prompt_tokens: expect.any(Number),
          completion_tokens: expect.any(Number),
          total_tokens: expect.any(Number),
          prompt_tokens_details: { cached_tokens: 0 },
        }),
      );
    });

    it.each(BAD_BODIES)('answers %s with 400 naming the field, never reaching the model', async (_, body, details) => {
      const run = vi.spyOn(model.pool, 'run');
      const stream = vi.spyOn(model.pool, 'stream');
      try {
        for (const streamed of [false, true]) {
          const payload = Array.isArray(body) ? body : { ...(streamed ? { stream: true } : {}), ...(body as object) };
          const response = await fetch(`${app.url}/v1/completions`, json(payload));
          expect(response.status).toBe(400);
          // OpenAI's error object, as on every /v1/* endpoint: `param` is the field, microbatch's `details` beside.
          expect(await response.json()).toEqual({
            error: {
              message: expect.any(String),
              type: 'invalid_request_error',
              param: details.field ?? null,
              code: 'INVALID_INPUT',
              details,
            },
          });
        }
        expect(run).not.toHaveBeenCalled();
        expect(stream).not.toHaveBeenCalled();
      } finally {
        vi.restoreAllMocks();
      }
    });

    it('accepts OpenAI’s `user` (never the fairness key), and refuses one that is not a short string', async () => {
      expect(
        (await complete(app.url, { prompt: 'Once upon a time ', max_tokens: 2, user: 'alice' })).choices,
      ).toHaveLength(1);
      const response = await fetch(`${app.url}/v1/completions`, json({ prompt: 'Hi ', user: 'x'.repeat(257) }));
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { details: unknown } }).error.details).toEqual({ field: 'user' });
    });

    it('answers a malformed JSON body with 400 and an oversized one with 413, as JSON', async () => {
      const malformed = await fetch(`${app.url}/v1/completions`, { ...json({}), body: '{"prompt": "Hi' });
      const oversized = await fetch(`${app.url}/v1/completions`, json({ prompt: 'a'.repeat(200_000) }));
      expect([malformed.status, oversized.status]).toEqual([400, 413]);
      for (const response of [malformed, oversized])
        expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    });

    it('refuses with 415 what is not UTF-8 JSON (form posts need no CORS preflight), never reaching the model', async () => {
      const run = vi.spyOn(model.pool, 'run');
      const stream = vi.spyOn(model.pool, 'stream');
      try {
        const cases: Array<[Record<string, string>, string]> = [
          [{ 'content-type': 'application/x-www-form-urlencoded' }, 'prompt=Once+upon+a+time'],
          [{ 'content-type': 'text/plain' }, '{"prompt": "Once upon a time "}'],
          [{ 'content-type': 'application/json; charset=latin1' }, '{"prompt": "Once upon a time "}'],
          [{ 'content-type': 'application/json', 'content-encoding': 'x-unknown' }, '{"prompt": "Once upon a time "}'],
        ];
        for (const [headers, body] of cases) {
          const response = await fetch(`${app.url}/v1/completions`, { method: 'POST', headers, body });
          expect([response.status, ((await response.json()) as { error: { code: string } }).error.code]).toEqual([
            415,
            'UNSUPPORTED_MEDIA_TYPE',
          ]);
        }
        const mismatch = await fetch(`${app.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
          body: '{"prompt": "Once upon a time "}',
        });
        const invalid = (message: string) => ({
          error: { message, type: 'invalid_request_error', param: null, code: 'INVALID_INPUT' },
        });
        expect([mismatch.status, await mismatch.json()]).toEqual([
          400,
          invalid('The request body does not match its Content-Encoding'),
        ]);
        const malformed = await fetch(`${app.url}/v1/completions`, { ...json({}), body: '{"prompt": CLIENT-BYTES}' });
        expect([malformed.status, await malformed.json()]).toEqual([
          400,
          invalid('The request body is not valid JSON'),
        ]);
        expect(run).not.toHaveBeenCalled();
        expect(stream).not.toHaveBeenCalled();
      } finally {
        vi.restoreAllMocks();
      }
    });

    it('shows no X-Powered-By, and its 404 does not echo a long path', async () => {
      const longPath = `/${'a'.repeat(5_000)}`;
      const missing = await fetch(`${app.url}${longPath}`);
      const health = await fetch(`${app.url}/healthz`);
      const body = (await missing.json()) as { error: { code: string; message: string } };
      expect([missing.status, body.error.code]).toEqual([404, 'NOT_FOUND']);
      expect(body.error.message).toBe(`No route for GET /${'a'.repeat(63)}...`);
      expect([missing.headers.get('x-powered-by'), health.headers.get('x-powered-by')]).toEqual([null, null]);
    });

    it('answers another method on a known path 405 with Allow, in the JSON error shape (OpenAI’s on /v1/*)', async () => {
      const put = await fetch(`${app.url}/v1/completions`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect([put.status, put.headers.get('allow'), await put.json()]).toEqual([
        405,
        'POST',
        {
          error: {
            message: 'PUT is not allowed on /v1/completions; allowed: POST',
            type: 'invalid_request_error',
            param: null,
            code: 'METHOD_NOT_ALLOWED',
            details: { allowed: ['POST'] },
          },
        },
      ]);
      const options = await fetch(`${app.url}/?text=Hi`, { method: 'OPTIONS' });
      expect([
        options.status,
        options.headers.get('allow'),
        ((await options.json()) as { error: { code: string } }).error.code,
      ]).toEqual([405, 'GET, HEAD', 'METHOD_NOT_ALLOWED']);
    });

    it('answers HEAD /?text= without running the model', async () => {
      const run = vi.spyOn(model.pool, 'run');
      const stream = vi.spyOn(model.pool, 'stream');
      try {
        const before = model.generate.stats().itemsProcessed;
        const response = await fetch(`${app.url}/?text=Once+upon+a+time`, { method: 'HEAD' });
        expect(response.status).toBe(200);
        expect(await response.text()).toBe('');
        expect(model.generate.stats().itemsProcessed).toBe(before);
        expect(run).not.toHaveBeenCalled();
        expect(stream).not.toHaveBeenCalled();
      } finally {
        vi.restoreAllMocks();
      }
    });

    it('serves Prometheus metrics on /metrics', async () => {
      const response = await fetch(`${app.url}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await response.text()).toMatch(/^microbatch_\w+\{[^}]*name="generate"/m);
    });

    it('lists the served model on GET /v1/models, as OpenAI clients read it', async () => {
      const response = await fetch(`${app.url}/v1/models`);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({
        object: 'list',
        data: [{ id: MODEL_ID, object: 'model', created: expect.any(Number), owned_by: 'microbatch' }],
      });
    });

    it('serves 16 prompts, JSON and streamed, without a MaxListenersExceededWarning', async () => {
      const warnings: Error[] = [];
      const onWarning = (warning: Error) => warnings.push(warning);
      process.on('warning', onWarning);
      try {
        const prompts = Array.from({ length: 16 }, (_, index) => `Once upon a time ${index} `);
        await complete(app.url, { prompt: prompts, max_tokens: 2 });
        const streamed = await fetch(
          `${app.url}/v1/completions`,
          json({ prompt: prompts, max_tokens: 2, stream: true }),
        );
        expect(parseSse(await streamed.text()).at(-1)?.data).toBe('[DONE]');
        // Warnings are emitted on the next tick.
        await new Promise((resolve) => setImmediate(resolve));
      } finally {
        process.off('warning', onWarning);
      }
      expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual([]);
    });

    it('serves a temperature below the floor (a denormal such as 1e-45) as greedy', async () => {
      const greedy = await complete(app.url, { prompt: 'Once upon a time ', max_tokens: 8, temperature: 0 });
      const denormal = await complete(app.url, { prompt: 'Once upon a time ', max_tokens: 8, temperature: 1e-45 });
      expect(denormal.choices[0]?.text).toBe(greedy.choices[0]?.text);
    });

    it.each(['/', '/?text=', '/?text=%20', '/?text=a&text=b'])(
      'answers GET %s with 400 naming `text`',
      async (path) => {
        const response = await fetch(`${app.url}${path}`);
        expect(response.status).toBe(400);
        expect(await response.json()).toEqual({
          error: { code: 'INVALID_INPUT', message: expect.any(String), details: { field: 'text' } },
        });
      },
    );

    it('reports liveness and readiness', async () => {
      for (const path of ['/healthz', '/readyz']) {
        const response = await fetch(`${app.url}${path}`);
        expect([path, response.status, await response.json()]).toEqual([path, 200, { status: 'ok' }]);
      }
    });

    it('is unready while its model loads, then ready, then unready and refusing work (503 CLOSED) once drained', async () => {
      const loading = createTextCompletionModel({ model: bundledModelDir(), log: false });
      const other = await serve(loading);
      try {
        const early = await fetch(`${other.url}/readyz`);
        expect([early.status, await early.json()]).toEqual([
          503,
          { status: 'unavailable', reasons: ['model is not ready'] },
        ]);
        await loading.ready;
        expect((await fetch(`${other.url}/readyz`)).status).toBe(200);
        await loading.drain();
        const drained = await fetch(`${other.url}/readyz`);
        expect(drained.status).toBe(503);
        expect(((await drained.json()) as { reasons: string[] }).reasons).toContain('batcher "generate" is closed');
        const refused = await fetch(`${other.url}/v1/completions`, json({ prompt: 'Hi ', max_tokens: 2 }));
        expect(refused.status).toBe(503);
        expect(refused.headers.get('retry-after')).toBe('1');
        expect(await refused.json()).toEqual({
          error: { message: expect.any(String), type: 'server_overloaded', param: null, code: 'CLOSED' },
        });
      } finally {
        await other.close();
      }
    });

    it('drains on SIGTERM: requests in flight get their answers, later ones 503, and the process exits 0', async () => {
      const server = await startChild(cwd, ['--import', 'tsx', 'src/main.ts']);
      const client = await warmClient(server.url, 7);
      // The app as `pnpm start` runs it (under tsx: no decorator metadata for Nest) answers the tutorial's GET.
      const story = await client.send('GET', '/?text=Once+upon+a+time');
      expect([story.status, story.body.startsWith('Once upon a time ')]).toEqual([200, true]);
      let signalled = false;
      // Its first chunk proves a batch is running when the signal arrives.
      const streamed = client.send(
        'POST',
        '/v1/completions',
        { prompt: 'Once upon a time ', max_tokens: 200, stream: true },
        () => {
          if (!signalled) signalled = server.child.kill('SIGTERM');
        },
      );
      const others = Array.from({ length: 6 }, (_, i) =>
        client.send('POST', '/v1/completions', { prompt: `Story ${i}: `, max_tokens: 48 }),
      );
      const [stream, ...answers] = await Promise.all([streamed, ...others]);
      client.close();
      expect(await server.exited).toBe(0);
      expect(stream.status).toBe(200);
      expect(stream.body.endsWith('data: [DONE]\n\n')).toBe(true);
      for (const answer of answers) {
        const body = JSON.parse(answer.body) as { object?: string; error?: { code: string } };
        expect(answer.status === 200 ? body.object : body.error?.code).toBe(
          answer.status === 200 ? 'text_completion' : 'CLOSED',
        );
      }
      // Nothing accepted was dropped: every sequence that joined the decode loop (the story, the stream and the
      // accepted completions) was answered 200; the loop's last line is logged before the process exits.
      const joins = /^\[inference\] decode loop, .* (\d+) joined, (\d+) left(?:, prefix cache .*)?$/gm;
      const lines = [...server.output().matchAll(joins)];
      const joined = lines.reduce((n, m) => n + Number(m[1]), 0);
      expect(joined).toBe(2 + answers.filter((answer) => answer.status === 200).length);
      expect(lines.reduce((n, m) => n + Number(m[2]), 0)).toBe(joined);
      expect(server.output()).toMatch(/SIGTERM: no longer accepting requests[\s\S]*drained and closed; exiting/);
    });
  });
}
