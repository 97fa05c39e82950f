// API keys as an operator runs them: `microbatch serve` on each framework with a key file and MICROBATCH_API_KEY,
// read by the official `openai` client (the right key served, a wrong one `AuthenticationError`), the key file
// re-read on SIGHUP (a bad file keeps the old keys), a web replica over `--queue` checking keys for its workers, and
// `microbatch worker --api-key` refused, naming why. No key ever appears in the logs.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import {
  type ChildHandle,
  type ServerProcess,
  type TestRedis,
  startProcess,
  startRedisServer,
  startServerProcess,
} from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const FILE_KEY = 'sk-file-key-5c1e';
const ENV_KEY = 'sk-env-key-9d02';
const NEW_KEY = 'sk-rotated-key-7aa4';
const dir = mkdtempSync(join(tmpdir(), 'microbatch-keys-'));

const client = (server: ServerProcess, apiKey: string) =>
  new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 });

/** A one-token completion through the official client, or the error it threw. */
async function complete(server: ServerProcess, apiKey: string): Promise<unknown> {
  try {
    const completion = await client(server, apiKey).completions.create({
      model: 'tinystories-656k',
      prompt: 'Once upon a time',
      max_tokens: 2,
    });
    return completion.object;
  } catch (error) {
    return error;
  }
}

function expectNoKeyLogged(process: ChildHandle): void {
  for (const key of [FILE_KEY, ENV_KEY, NEW_KEY]) expect(process.output()).not.toContain(key);
}

describe.each(['express', 'koa', 'fastify', 'hono', 'nest'])(
  'microbatch serve --framework %s with API keys',
  (framework) => {
    it('serves the official client with a right key and answers AuthenticationError (401) to a wrong or missing one', async () => {
      const file = join(dir, `${framework}.keys`);
      writeFileSync(file, `# keys\nteam-a:${FILE_KEY}\n`);
      const args = [BIN, 'serve', '--model', bundledModelDir(), '--framework', framework, '--port', '0'];
      args.push('--log-format', 'json', '--api-key-file', file);
      const server = await startServerProcess({
        args,
        env: { ...process.env, MICROBATCH_API_KEY: ENV_KEY },
        ready: READY,
      });
      try {
        expect(await complete(server, FILE_KEY)).toBe('text_completion');
        expect(await complete(server, ENV_KEY)).toBe('text_completion');
        const wrong = await complete(server, 'sk-wrong');
        expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError);
        expect((wrong as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
        const missing = await fetch(`${server.url}/v1/models`);
        expect([missing.status, missing.headers.get('www-authenticate')]).toEqual([401, 'Bearer']);
        expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
        if (framework === 'express') {
          // Rotated: the file's new key works, its old one is refused, the environment's stays.
          writeFileSync(file, `team-b:${NEW_KEY}\n`);
          server.child.kill('SIGHUP');
          await server.waitForOutput(/"msg":"reloaded the API keys from [^"]+"/, 30_000);
          expect(await complete(server, NEW_KEY)).toBe('text_completion');
          expect(await complete(server, FILE_KEY)).toBeInstanceOf(OpenAI.AuthenticationError);
          expect(await complete(server, ENV_KEY)).toBe('text_completion');
          // A bad file is logged and changes nothing.
          writeFileSync(file, 'bad name:sk-x\n');
          server.child.kill('SIGHUP');
          await server.waitForOutput(/"msg":"API key file not reloaded; the keys stay as they were"/, 30_000);
          expect(await complete(server, NEW_KEY)).toBe('text_completion');
        }
      } finally {
        server.child.kill('SIGTERM');
      }
      expect((await server.exited).code).toBe(0);
      const start = (server.jsonLines() as Array<Record<string, unknown>>).find(
        (line) => line.msg === 'microbatch serve',
      );
      expect(start).toMatchObject({
        fairnessKey: 'api-key',
        apiKeys: [expect.stringMatching(/^key-[0-9a-f]{8}$/), 'team-a'],
      });
      expectNoKeyLogged(server);
    });
  },
);

describe('refusals of key flags that would do nothing', () => {
  const run = (args: readonly string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(process.execPath, [BIN, ...args], (error, _stdout, stderr) =>
        resolve({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stderr }),
      );
    });

  it('refuses worker --api-key naming why, and --protect-metrics or --fairness-key api-key without keys', async () => {
    const worker = await run(['worker', '--queue', 'redis://127.0.0.1:1', '--model', 'x', '--api-key', 'sk-1']);
    expect(worker.code).toBe(1);
    expect(worker.stderr).toMatch(/--api-key has no effect on a worker: it serves no HTTP/);
    expect(worker.stderr).not.toContain('sk-1');
    const metrics = await run(['serve', '--model', bundledModelDir(), '--protect-metrics', '--port', '0']);
    expect([metrics.code, metrics.stderr]).toEqual([1, expect.stringMatching(/--protect-metrics has no effect/)]);
    const fairness = await run(['serve', '--model', bundledModelDir(), '--fairness-key', 'api-key', '--port', '0']);
    expect([fairness.code, fairness.stderr]).toEqual([
      1,
      expect.stringMatching(/--fairness-key api-key needs API keys/),
    ]);
    const badKey = await run(['serve', '--model', bundledModelDir(), '--api-key', 'has space', '--port', '0']);
    expect([badKey.code, badKey.stderr]).toEqual([1, expect.stringMatching(/a key must be/)]);
    expect(badKey.stderr).not.toContain('has space');
  });
});

describe('microbatch serve --queue with API keys', () => {
  let redis: TestRedis;
  let replica: ServerProcess;
  let worker: ChildHandle;

  beforeAll(async () => {
    redis = await startRedisServer();
    worker = startProcess({
      args: [BIN, 'worker', '--queue', redis.url, '--model', bundledModelDir(), '--log-format', 'json'],
    });
    replica = await startServerProcess({
      args: [BIN, 'serve', '--queue', redis.url, '--model', 'tinystories-656k', '--port', '0', '--log-format', 'json'],
      env: { ...process.env, MICROBATCH_API_KEY: ENV_KEY },
      ready: READY,
    });
    await worker.waitForOutput(/"msg":"worker ready"/, 90_000);
  });
  afterAll(async () => {
    await Promise.all([replica?.stop(), worker?.stop()]);
    await redis?.stop();
  });

  it('serves the official client with the right key through the worker, and 401s a wrong one at the replica', async () => {
    let answer: unknown;
    // The replica is ready once it has heard the worker's heartbeat.
    for (let tries = 0; tries < 100; tries++) {
      answer = await complete(replica, ENV_KEY);
      if (answer === 'text_completion') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(answer).toBe('text_completion');
    expect(await complete(replica, 'sk-wrong')).toBeInstanceOf(OpenAI.AuthenticationError);
    expectNoKeyLogged(replica);
    expectNoKeyLogged(worker);
  });
});
