// `microbatch serve` and `microbatch worker` on a decoder exported without a KV cache: with --scheduling left out
// they run it under request scheduling (logged as a warning, the start line saying so), the server answering what
// transformers.js generates from the same weights exported with a cache; `--scheduling continuous` and a loop flag
// the fallback would drop fail the start, saying why, with exit code 1 and no stack trace.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type ServerProcess,
  type TestRedis,
  startProcess,
  startRedisServer,
  startServerProcess,
  writeLlamaModel,
} from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPAT_NEW_TOKENS, COMPAT_PROMPTS, COMPAT_SHAPE } from '../../inference/test/helpers/compat-fixture.js';
import { TINYSTORIES_DIR } from '../../inference/test/helpers/paths.js';
import { seamless, transformersGreedy } from '../../inference/test/helpers/transformers-reference.js';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const WHY =
  "onnx/model.onnx has no KV cache (no past_key_values.* inputs): the continuous decode loop feeds each step's keys " +
  'and values back into the graph';

let root: string;
let noKv: string;
let withKv: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'microbatch-serve-no-kv-'));
  noKv = join(root, 'no-kv');
  withKv = join(root, 'with-kv');
  await writeLlamaModel(noKv, COMPAT_SHAPE, TINYSTORIES_DIR, { kvCache: false });
  await writeLlamaModel(withKv, COMPAT_SHAPE, TINYSTORIES_DIR);
});
afterAll(() => rm(root, { recursive: true, force: true }));

function run(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

describe('microbatch serve --model <a decoder without a KV cache>', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({
      args: [BIN, 'serve', '--port', '0', '--log-format', 'json', '--model', noKv],
      env: { ...process.env },
      ready: READY,
    });
  }, 120_000);
  afterAll(() => server?.stop());

  it('falls back to request scheduling, logged as a warning, and says so in its start line', () => {
    const lines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; scheduling?: string });
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 40, scheduling: 'request', msg: `${WHY}; serving it with request scheduling` }),
    );
    expect(lines.find((line) => line.msg === 'microbatch serve')?.scheduling).toBe('request');
  });

  it('answers /v1/completions with what transformers.js generates from the same weights with a cache', async () => {
    const expected = await transformersGreedy(withKv, 'fp32', 'model', COMPAT_PROMPTS, COMPAT_NEW_TOKENS);
    const answers = await Promise.all(
      COMPAT_PROMPTS.map(async (prompt) => {
        const response = await fetch(`${server.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', prompt, max_tokens: COMPAT_NEW_TOKENS, temperature: 0 }),
        });
        const text = await response.text();
        expect({ status: response.status, body: text }).toMatchObject({ status: 200 });
        return JSON.parse(text) as { choices: { text: string }[]; usage: { completion_tokens: number } };
      }),
    );
    expect(answers.map((json) => seamless(json.choices[0]?.text ?? ''))).toEqual(
      expected.map(({ text }) => seamless(text)),
    );
    expect(answers.map((json) => json.usage.completion_tokens)).toEqual(COMPAT_PROMPTS.map(() => COMPAT_NEW_TOKENS));
  });
});

describe('microbatch serve refuses to start on a decoder without a KV cache', () => {
  it('with --scheduling continuous, saying why and what to do', async () => {
    const { code, stderr } = await run(['serve', '--model', noKv, '--port', '0', '--scheduling', 'continuous']);
    expect(code).toBe(1);
    expect(stderr).toContain(
      `continuous scheduling cannot run this model: ${WHY}. Use request scheduling (--scheduling request, or ` +
        'leave --scheduling out)',
    );
    expect(stderr).not.toMatch(/\n\s+at /);
  });

  it('with a loop flag the fallback would leave with no effect, naming it', async () => {
    const { code, stderr } = await run(['serve', '--model', noKv, '--port', '0', '--max-sequences', '8']);
    expect(code).toBe(1);
    expect(stderr).toContain(
      `--max-sequences has no effect for this model: ${WHY}, so it runs under request scheduling, where there is ` +
        'no decode loop; a batch holds up to --max-batch-size requests',
    );
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});

describe('microbatch worker --model <a decoder without a KV cache>', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(() => redis?.stop());

  it('pulls under request scheduling, logged as a warning, where --scheduling was left out', async () => {
    const worker = startProcess({
      args: [BIN, 'worker', '--queue', redis.url, '--model', noKv, '--log-format', 'json'],
    });
    try {
      await worker.waitForOutput(/"msg":"worker ready"/, 90_000);
      const lines = worker.jsonLines() as readonly { level: number; msg: string; scheduling?: string }[];
      expect(lines).toContainEqual(
        expect.objectContaining({
          level: 40,
          scheduling: 'request',
          msg: `${WHY}; serving it with request scheduling`,
        }),
      );
      expect(lines.find((line) => line.msg === 'microbatch worker')?.scheduling).toBe('request');
    } finally {
      await worker.stop();
    }
  });

  it('refuses --scheduling continuous and a loop flag the fallback would drop, with exit code 1', async () => {
    const continuous = await run(['worker', '--queue', redis.url, '--model', noKv, '--scheduling', 'continuous']);
    expect(continuous.code).toBe(1);
    expect(continuous.stderr).toContain(`continuous scheduling cannot run this model: ${WHY}.`);
    const loop = await run(['worker', '--queue', redis.url, '--model', noKv, '--prefix-cache-mb', '8']);
    expect(loop.code).toBe(1);
    expect(loop.stderr).toContain(
      `--prefix-cache-mb has no effect for this model: ${WHY}, so it runs under request scheduling, where there is ` +
        'no decode loop',
    );
    expect(loop.stderr).not.toMatch(/\n\s+at /);
  });
});
