// Bad inputs against the REAL text-completion examples of all five frameworks (Express with its documented
// `pnpm start` command, Koa, Fastify, Hono and Nest with theirs): every bad input is answered with its exact 4xx and
// `{"error":{"code","message"}}` (on `/v1/*` in OpenAI's shape: `type` and `param` too), no body carries a stack
// trace, odd but valid unicode never gets a 5xx, and each server is up and healthy afterwards (and logged nothing on
// stderr). Each framework is reported on its own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BAD_INPUTS, type CorpusRequest, EDGE_INPUTS, IGNORED_INPUTS, PROTOCOL_INPUTS } from './bad-input-corpus.js';
import { type ServerProcess, exampleStartArgs, startServer } from './helpers/child.js';
import {
  type Answer,
  type Outcome,
  answer,
  errorBody,
  leaksInternals,
  postJson,
  send,
  sendRaw,
} from './helpers/http.js';
import { countBy, flush, groupBy, record } from './helpers/report.js';

const FRAMEWORKS = ['express', 'koa', 'fastify', 'hono', 'nest'] as const;
type Framework = (typeof FRAMEWORKS)[number];

/** Each example as its README starts it: Express through the root `start` script, the others their `src/main.ts`. */
function startArgs(framework: Framework): string[] {
  return framework === 'express'
    ? exampleStartArgs()
    : ['--import', 'tsx', `examples/${framework}-text-completion/src/main.ts`];
}

afterAll(async () => {
  await flush('bad-input');
});

describe.each(FRAMEWORKS)('bad inputs against the %s text-completion example', (framework) => {
  let server: ServerProcess;

  beforeAll(async () => {
    server = await startServer({ args: startArgs(framework) });
  });

  afterAll(async () => {
    await server?.stop();
  });

  function sendCase(request: CorpusRequest): Promise<Outcome> {
    return send(server.url, request.path, {
      method: request.method,
      ...(request.headers === undefined ? {} : { headers: request.headers }),
      ...(request.body === undefined ? {} : { body: request.body }),
      timeoutMs: 30_000,
    });
  }

  /** What was checked of one answer, for the report. */
  interface CaseResult {
    readonly name: string;
    readonly group: string;
    readonly status: number | string;
    readonly code?: string;
    readonly ok: boolean;
  }
  const badResults: CaseResult[] = [];
  const edgeResults: CaseResult[] = [];
  const protocolResults: CaseResult[] = [];

  /** Why an answer is not the expected 4xx error, or `undefined` when it is. */
  function badAnswerProblem(answer: Answer, expected: (typeof BAD_INPUTS)[number]): string | undefined {
    const error = errorBody(answer.body);
    if (answer.status !== expected.status) return `status ${answer.status}, expected ${expected.status}`;
    if (error === undefined) return `body is not {"error":{"code","message"}}: ${answer.body.slice(0, 200)}`;
    if (leaksInternals(answer.body)) return `body leaks internals: ${answer.body.slice(0, 200)}`;
    if (error.code !== expected.code) return `code ${error.code}, expected ${expected.code}`;
    if (!String(answer.headers['content-type']).startsWith('application/json'))
      return `content-type ${answer.headers['content-type']}`;
    const field = (error.details as { field?: unknown } | undefined)?.field;
    if (expected.field !== undefined && field !== expected.field)
      return `details.field ${String(field)}, expected ${expected.field}`;
    return shapeProblem(expected.request.path, error, expected.field);
  }

  describe.each(Object.entries(groupBy(BAD_INPUTS, (input) => input.group)))('%s', (_group, inputs) => {
    it.each(inputs.map((input) => [input.name, input] as const))('%s', async (_name, input) => {
      const outcome = await sendCase(input.request);
      const problem =
        outcome.kind === 'answered' ? badAnswerProblem(outcome.answer, input) : `no answer: ${JSON.stringify(outcome)}`;
      const status = outcome.kind === 'answered' ? outcome.answer.status : outcome.kind;
      const code = outcome.kind === 'answered' ? errorBody(outcome.answer.body)?.code : undefined;
      badResults.push({
        name: input.name,
        group: input.group,
        status,
        ...(code === undefined ? {} : { code }),
        ok: problem === undefined,
      });
      expect(
        problem,
        `${input.name}: ${outcome.kind === 'answered' ? outcome.answer.body.slice(0, 300) : ''}`,
      ).toBeUndefined();
    });
  });

  it.each([...EDGE_INPUTS, ...IGNORED_INPUTS].map((input) => [`${input.group}: ${input.name}`, input] as const))(
    'odd but valid, %s: 200 or a 4xx error, never 5xx',
    async (_name, input) => {
      const outcome = await sendCase(input.request);
      let problem: string | undefined;
      if (outcome.kind !== 'answered') problem = `no answer: ${JSON.stringify(outcome)}`;
      else {
        const { status, body, headers } = outcome.answer;
        if (!input.allowed.includes(status))
          problem = `status ${status}, allowed ${input.allowed.join('/')}: ${body.slice(0, 200)}`;
        else if (leaksInternals(body)) problem = `body leaks internals: ${body.slice(0, 200)}`;
        else if (status >= 400 && errorBody(body) === undefined) problem = `not an error body: ${body.slice(0, 200)}`;
        else if (
          status === 200 &&
          input.request.method === 'GET' &&
          !String(headers['content-type']).startsWith('text/plain')
        ) {
          problem = `content-type ${headers['content-type']}`;
        } else if (status === 200 && input.request.method === 'POST')
          problem = (input.check ?? ((text) => isCompletion(text)))(body);
      }
      const status = outcome.kind === 'answered' ? outcome.answer.status : outcome.kind;
      edgeResults.push({ name: input.name, group: input.group, status, ok: problem === undefined });
      expect(problem).toBeUndefined();
    },
  );

  it.each(PROTOCOL_INPUTS.map((input) => [input.name, input] as const))(
    'broken HTTP, %s: answered by Node or the app with a 4xx, no stack trace',
    async (_name, input) => {
      const raw = await sendRaw(server.url, input.bytes);
      protocolResults.push({
        name: input.name,
        group: 'protocol',
        status: raw.status,
        ok: raw.status === input.status && !leaksInternals(raw.body),
      });
      expect(raw.status).toBe(input.status);
      expect(leaksInternals(raw.body)).toBe(false);
    },
  );

  it('is up, ready and unharmed afterwards: health 200, `{}` still lacks a prompt, a completion works, nothing on stderr', async () => {
    const health = await answer(server.url, '/healthz');
    const ready = await answer(server.url, '/readyz');
    // Had any body polluted Object.prototype with `prompt`, `{}` would now be a valid request.
    const empty = await postJson(server.url, '/v1/completions', {});
    const good = await postJson(server.url, '/v1/completions', { prompt: 'Once upon a time ', max_tokens: 4 });
    const alive = server.exitInfo() === undefined;
    if (!alive) console.error(`${framework} server exited: ${JSON.stringify(server.exitInfo())}\n${server.stderr()}`);
    const bad = badResults.length;
    const rejected = badResults.filter((result) => result.ok).length;
    const answeredOnce = [...badResults, ...edgeResults].filter((result) => typeof result.status === 'number').length;
    const headers = [health.headers, ready.headers];
    record({
      // 'bad-input' stays the Express example's name, as in earlier reports.
      scenario: framework === 'express' ? 'bad-input' : `bad-input-${framework}`,
      server: `${framework}-text-completion`,
      requests_sent: bad + edgeResults.length,
      answered_exactly_once: answeredOnce,
      lost: bad + edgeResults.length - answeredOnce,
      crashes: alive ? 0 : 1,
      bad_inputs_tried: bad,
      bad_inputs_rejected_4xx: rejected,
      detail: {
        failed_bad_inputs: badResults.filter((result) => !result.ok),
        odd_inputs_tried: edgeResults.length,
        odd_inputs_by_status: countBy(edgeResults, (result) => String(result.status)),
        odd_inputs: edgeResults,
        protocol_inputs_tried: protocolResults.length,
        protocol_inputs_rejected_4xx: protocolResults.filter((result) => result.ok).length,
        framework,
        stderr: server.stderr(),
      },
    });
    for (const sent of headers) expect(sent['x-powered-by']).toBeUndefined();
    // The same probe headers on all three frameworks: a cached probe answer would be a wrong one.
    for (const sent of headers) expect(sent['cache-control']).toBe('no-store');
    expect(alive).toBe(true);
    expect([health.status, ready.status]).toEqual([200, 200]);
    expect(empty.kind === 'answered' && [empty.answer.status, errorBody(empty.answer.body)?.details]).toEqual([
      400,
      { field: 'prompt' },
    ]);
    expect(good.kind === 'answered' && good.answer.status).toBe(200);
    expect(server.stderr()).toBe('');
    expect(bad).toBe(BAD_INPUTS.length);
  });
});

/**
 * Why an error is not in the shape its path's answers take, or `undefined`: OpenAI's on `/v1/*` (`type`, and `param`
 * naming the field or `null`), microbatch's elsewhere (neither).
 */
function shapeProblem(path: string, error: Record<string, unknown>, field: string | undefined): string | undefined {
  if (!path.startsWith('/v1/')) {
    return 'type' in error || 'param' in error ? `OpenAI fields on ${path}: ${JSON.stringify(error)}` : undefined;
  }
  if (error.type !== 'invalid_request_error') return `error.type ${String(error.type)}, expected invalid_request_error`;
  // `param` is the field the server names (`details.field`), which the corpus states where it matters.
  const named = (error.details as { field?: unknown } | undefined)?.field ?? null;
  const param = field ?? named;
  if (error.param !== param) return `error.param ${JSON.stringify(error.param)}, expected ${JSON.stringify(param)}`;
  return undefined;
}

function isCompletion(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { object?: unknown; choices?: { text?: unknown }[] };
    return parsed.object === 'text_completion' && typeof parsed.choices?.[0]?.text === 'string'
      ? undefined
      : 'not a text_completion';
  } catch {
    return `not JSON: ${body.slice(0, 100)}`;
  }
}
