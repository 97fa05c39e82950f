// The prefix cache kept apart by tenant, tried as the attack of issue 37 against a real `microbatch serve`: a victim
// sends a system prompt holding a password; an attacker (another API key, or another client address without keys)
// sends a right and a wrong guess, and both come back with the same `cached_tokens`, so the attacker learns nothing;
// the victim still reuses its own prompt; with --shared-prefix-cache the right guess is found (the documented
// trade-off), and a request's `cache_salt` keeps even one tenant's requests apart.
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const SECRET =
  'You are the vault keeper. The password is tangerine elephant. Never tell anyone the password, not even Tom. ';
const WRONG =
  'You are the vault keeper. The password is purple submarine. Never tell anyone the password, not even Tom. ';
const KEYS = { victim: 'sk-victim-1a2b', attacker: 'sk-attacker-3c4d', other: 'sk-other-5e6f' };

function serve(extra: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  const args = [BIN, 'serve', '--model', bundledModelDir(), '--port', '0', '--log-format', 'json', ...extra];
  return startServerProcess({ args, env: { ...process.env, ...env }, ready: READY });
}

/** `cached_tokens` of a one-token completion of `prompt` with `apiKey` (and `cache_salt`). */
async function cachedWithKey(server: ServerProcess, apiKey: string, prompt: string, salt?: string): Promise<number> {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 });
  const body = { model: 'tinystories-656k', prompt, max_tokens: 1, temperature: 0 };
  const completion = await client.completions.create(
    (salt === undefined ? body : { ...body, cache_salt: salt }) as OpenAI.CompletionCreateParamsNonStreaming,
  );
  return completion.usage?.prompt_tokens_details?.cached_tokens ?? 0;
}

/** `cached_tokens` of a one-token completion of `prompt` sent from the loopback address `from`. */
function cachedFrom(server: ServerProcess, from: string, prompt: string): Promise<number> {
  const url = new URL(`${server.url}/v1/completions`);
  const payload = JSON.stringify({ prompt, max_tokens: 1, temperature: 0 });
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', localAddress: from },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          const usage = (JSON.parse(text) as { usage?: { prompt_tokens_details?: { cached_tokens?: number } } }).usage;
          resolve(usage?.prompt_tokens_details?.cached_tokens ?? 0);
        });
      },
    );
    req.on('error', reject);
    req.setHeader('content-type', 'application/json');
    req.end(payload);
  });
}

describe('prefix cache tenants with API keys', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    const args = ['--api-key', KEYS.victim, '--api-key', KEYS.attacker, '--api-key', KEYS.other];
    server = await serve(args);
  });
  afterAll(() => server?.stop());

  it('gives another key the same cached_tokens for a right and a wrong guess; the same key its hits', async () => {
    expect(await cachedWithKey(server, KEYS.victim, `${SECRET}Once upon a time`)).toBe(0);
    // Each guess under a key of its own: a key's own earlier guesses are its to reuse (they share blocks).
    const right = await cachedWithKey(server, KEYS.attacker, `${SECRET}The cat`);
    const wrong = await cachedWithKey(server, KEYS.other, `${WRONG}The cat`);
    expect({ right, wrong }).toEqual({ right: 0, wrong: 0 });
    expect(await cachedWithKey(server, KEYS.victim, `${SECRET}Lily`)).toBeGreaterThanOrEqual(32);
    // A request's own cache_salt: the same key, a fresh salt, no reuse; then that salt's own hits.
    expect(await cachedWithKey(server, KEYS.victim, `${SECRET}Ben`, 'conversation-2')).toBe(0);
    expect(await cachedWithKey(server, KEYS.victim, `${SECRET}Max`, 'conversation-2')).toBeGreaterThanOrEqual(32);
  });
});

describe('prefix cache tenants by client address (no keys)', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await serve([]);
  });
  afterAll(() => server?.stop());

  it('gives 127.0.0.3 the same cached_tokens for a right and a wrong guess of 127.0.0.2 prompt', async () => {
    expect(await cachedFrom(server, '127.0.0.2', `${SECRET}Once upon a time`)).toBe(0);
    const right = await cachedFrom(server, '127.0.0.3', `${SECRET}The cat`);
    expect(right).toBe(0);
    const wrong = await cachedFrom(server, '127.0.0.4', `${WRONG}The cat`);
    expect(wrong).toBe(right);
    expect(await cachedFrom(server, '127.0.0.2', `${SECRET}Lily`)).toBeGreaterThanOrEqual(32);
  });
});

describe('--shared-prefix-cache', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await serve(['--shared-prefix-cache']);
  });
  afterAll(() => server?.stop());

  it('shares cached blocks across addresses (the documented trade-off)', async () => {
    expect(await cachedFrom(server, '127.0.0.2', `${SECRET}Once upon a time`)).toBe(0);
    expect(await cachedFrom(server, '127.0.0.3', `${SECRET}The cat`)).toBeGreaterThanOrEqual(32);
  });
});
