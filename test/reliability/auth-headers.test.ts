// Hostile `Authorization` headers against `microbatch serve --api-key` on all five frameworks: missing, empty,
// another scheme, the key without a scheme, 10 KB, Unicode (raw UTF-8 bytes), two headers, a key one letter off.
// Every case gets the same answer on every framework (status, error code, `WWW-Authenticate`): 0 disagreements; a
// refusal is a 401 in OpenAI's shape that never quotes what was sent; the probes and metrics answer whatever the
// header says. Requests are written to the socket as bytes, so what reaches each server is exactly the case.
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBody, sendRaw } from './helpers/http.js';

const BIN = fileURLToPath(new URL('../../packages/cli/bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const FRAMEWORKS = ['express', 'koa', 'fastify', 'hono', 'nest'] as const;
const KEY = 'sk-corpus-key-0f3a9c';

interface AuthCase {
  readonly name: string;
  readonly path: string;
  /** Raw header lines (no CRLF), written as UTF-8 bytes. */
  readonly lines: readonly string[];
  readonly status: number;
}

const CASES: readonly AuthCase[] = [
  { name: 'no Authorization header', path: '/v1/models', lines: [], status: 401 },
  { name: 'empty', path: '/v1/models', lines: ['Authorization: '], status: 401 },
  { name: 'only spaces', path: '/v1/models', lines: ['Authorization:     '], status: 401 },
  { name: '`Bearer` alone', path: '/v1/models', lines: ['Authorization: Bearer'], status: 401 },
  { name: '`Bearer ` and spaces', path: '/v1/models', lines: ['Authorization: Bearer    '], status: 401 },
  { name: 'Basic', path: '/v1/models', lines: ['Authorization: Basic dXNlcjpwYXNz'], status: 401 },
  { name: 'Token scheme', path: '/v1/models', lines: [`Authorization: Token ${KEY}`], status: 401 },
  { name: 'the key without a scheme', path: '/v1/models', lines: [`Authorization: ${KEY}`], status: 401 },
  {
    name: 'a key one letter off',
    path: '/v1/models',
    lines: [`Authorization: Bearer ${KEY.slice(0, -1)}b`],
    status: 401,
  },
  {
    name: 'the key in upper case',
    path: '/v1/models',
    lines: [`Authorization: Bearer ${KEY.toUpperCase()}`],
    status: 401,
  },
  { name: 'the key and more', path: '/v1/models', lines: [`Authorization: Bearer ${KEY} ${KEY}`], status: 401 },
  { name: '10 KB', path: '/v1/models', lines: [`Authorization: Bearer ${'k'.repeat(10_240)}`], status: 401 },
  {
    name: '10 KB after the key',
    path: '/v1/models',
    lines: [`Authorization: Bearer ${KEY}${'k'.repeat(10_240)}`],
    status: 401,
  },
  { name: 'Unicode key', path: '/v1/models', lines: ['Authorization: Bearer ключ-🔑-密钥'], status: 401 },
  { name: 'Unicode scheme', path: '/v1/models', lines: [`Authorization: Bеarer ${KEY}`], status: 401 },
  { name: 'x-api-key instead', path: '/v1/models', lines: [`x-api-key: ${KEY}`], status: 401 },
  {
    name: 'wrong then right header',
    path: '/v1/models',
    lines: ['Authorization: Bearer nope', `Authorization: Bearer ${KEY}`],
    status: 401,
  },
  { name: 'right', path: '/v1/models', lines: [`Authorization: Bearer ${KEY}`], status: 200 },
  { name: 'right, lower-case scheme', path: '/v1/models', lines: [`Authorization: bearer ${KEY}`], status: 200 },
  { name: 'right, two spaces', path: '/v1/models', lines: [`Authorization: Bearer  ${KEY}`], status: 200 },
  { name: 'right, trailing spaces', path: '/v1/models', lines: [`Authorization: Bearer ${KEY}   `], status: 200 },
  { name: 'tutorial route, no key', path: '/?text=Hi', lines: [], status: 401 },
  { name: 'unknown /v1 path, no key', path: '/v1/nope', lines: [], status: 404 },
  { name: 'healthz, Unicode header', path: '/healthz', lines: ['Authorization: Bearer ключ'], status: 200 },
  {
    name: 'readyz, 10 KB header',
    path: '/readyz',
    lines: [`Authorization: Bearer ${'k'.repeat(10_240)}`],
    status: 200,
  },
  { name: 'metrics, Basic', path: '/metrics', lines: ['Authorization: Basic dXNlcjpwYXNz'], status: 200 },
];

/** What is compared across frameworks. */
interface Seen {
  readonly status: number;
  readonly code: string | undefined;
  readonly challenge: string | undefined;
  readonly quotesInput: boolean;
}

async function sendCase(url: string, c: AuthCase): Promise<Seen> {
  const head = [`GET ${c.path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...c.lines, '', ''].join('\r\n');
  const raw = await sendRaw(url, Buffer.from(head, 'utf8'), 30_000);
  const challenge = /^www-authenticate: *(.*)$/im.exec(raw.head)?.[1]?.trim();
  const sent = c.lines.map((line) => line.split(':').slice(1).join(':').trim()).filter((value) => value.length > 8);
  return {
    status: raw.status,
    code: raw.status === 200 ? undefined : errorBody(raw.body)?.code,
    challenge,
    quotesInput: sent.some((value) => raw.body.includes(value.slice(-8))),
  };
}

const results = new Map<string, Map<string, Seen>>();

describe.each(FRAMEWORKS)('Authorization corpus against microbatch serve --framework %s --api-key', (framework) => {
  let server: ServerProcess;
  beforeAll(async () => {
    const args = [BIN, 'serve', '--model', bundledModelDir(), '--framework', framework, '--port', '0'];
    args.push('--log-format', 'json', '--api-key', KEY);
    server = await startServerProcess({ args, env: { ...process.env }, ready: READY });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('answers each case as expected: 401 with WWW-Authenticate: Bearer, never quoting the header', async () => {
    const seen = new Map<string, Seen>();
    for (const c of CASES) seen.set(c.name, await sendCase(server.url, c));
    results.set(framework, seen);
    for (const c of CASES) {
      const answer = seen.get(c.name) as Seen;
      expect({ name: c.name, status: answer.status }).toEqual({ name: c.name, status: c.status });
      if (c.status === 401) {
        expect({ name: c.name, code: answer.code, challenge: answer.challenge }).toEqual({
          name: c.name,
          code: 'UNAUTHORIZED',
          challenge: 'Bearer',
        });
      }
      expect({ name: c.name, quotesInput: answer.quotesInput }).toEqual({ name: c.name, quotesInput: false });
    }
    expect(server.output()).not.toContain(KEY);
  });
});

describe('across the five frameworks', () => {
  it('has 0 disagreements', () => {
    const disagreements: string[] = [];
    for (const c of CASES) {
      const answers = FRAMEWORKS.map((framework) => JSON.stringify(results.get(framework)?.get(c.name) ?? null));
      if (new Set(answers).size !== 1) disagreements.push(`${c.name}: ${answers.join(' | ')}`);
    }
    console.log(
      `authorization corpus: ${CASES.length} cases x ${FRAMEWORKS.length} frameworks, ${disagreements.length} disagreements`,
    );
    expect(disagreements).toEqual([]);
  });
});
