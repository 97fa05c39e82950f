import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { samplesOf, startServerProcess } from '@microbatch/test-kit';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
/** The CLI's ready line, as pino writes it off a terminal. */
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const MODEL = bundledModelDir();
/**
 * The `texts` of Ray Serve's text-generator batching tutorial, read from the copy in ../shared/reference (beside the
 * repository, as on every machine that runs the tests), so the query script is checked against the tutorial itself.
 */
const RAY_TUTORIAL_PROMPTS = [
  ...(
    readFileSync(
      fileURLToPath(
        new URL('../../../../shared/reference/ray-serve-batching-tutorial-text-generator.md', import.meta.url),
      ),
      'utf8',
    ).match(/^texts = \[\n([\s\S]*?)\n\]/m)?.[1] ?? ''
  ).matchAll(/'([^']+)'/g),
].map((match) => match[1] as string);
const QUERY_SCRIPT = fileURLToPath(new URL('../../../examples/express-text-completion/src/query.ts', import.meta.url));

/** Runs `microbatch <args>` to completion. */
function run(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

describe('microbatch serve', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'microbatch-cli-'));
  });
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  it.each([
    [
      ['serve', '--model', MODEL, '--max-batch-size', 'x'],
      "error: option '--max-batch-size <n>' argument 'x' is invalid. Expected an integer from 1 up.",
    ],
    [
      ['serve', '--model', MODEL, '--port', '70000'],
      "error: option '--port <n>' argument '70000' is invalid. Expected an integer from 0 to 65535.",
    ],
    [
      ['serve', '--model', MODEL, '--framework', 'flask'],
      "error: option '--framework <name>' argument 'flask' is invalid. Allowed choices are express, koa, fastify, hono, nest.",
    ],
    [
      ['serve', '--model', MODEL, '--task', 'summarization'],
      "error: option '--task <task>' argument 'summarization' is invalid. Allowed choices are text-generation, feature-extraction, text-classification, rerank.",
    ],
    [['serve'], "error: required option '--model <dir>' not specified"],
    [['serve', '--model', MODEL, '--bogus'], "error: unknown option '--bogus'"],
  ])('refuses %j with commander’s message and exit code 1', async (args, message) => {
    const { code, stderr } = await run(args);
    expect(code).toBe(1);
    expect(stderr).toContain(message);
  });

  // A flag with no effect in the mode chosen is refused before anything starts (the queue's port is closed: a
  // replica that started would fail on Redis instead, later and with another message).
  const QUEUE = ['--queue', 'redis://127.0.0.1:1', '--model', 'tinystories-656k'];
  it.each([
    [['serve', ...QUEUE, '--workers', '2'], '--workers', 'a web replica (--queue) runs no model'],
    [['serve', ...QUEUE, '--threads', '2'], '--threads', 'a web replica (--queue) runs no model'],
    [['serve', ...QUEUE, '--scheduling', 'request'], '--scheduling', 'a web replica (--queue) runs no model'],
    [['serve', ...QUEUE, '--execution-provider', 'cpu'], '--execution-provider', 'a web replica'],
    [['serve', ...QUEUE, '--max-batch-size', '4'], '--max-batch-size', 'a web replica'],
    [['serve', ...QUEUE, '--batch-wait-ms', '5'], '--batch-wait-ms', 'a web replica'],
    [['serve', ...QUEUE, '--models-dir', 'elsewhere'], '--models-dir', 'a web replica (--queue) loads no model'],
    [['serve', '--model', MODEL, '--max-batch-size', '4'], '--max-batch-size', 'with --scheduling continuous'],
    [['serve', '--model', MODEL, '--batch-wait-ms', '5'], '--batch-wait-ms', 'with --scheduling continuous'],
    [
      ['serve', '--model', MODEL, '--scheduling', 'request', '--max-sequences', '4'],
      '--max-sequences',
      'with --scheduling request there is no decode loop',
    ],
    [
      ['worker', ...QUEUE, '--scheduling', 'request', '--max-sequences', '4'],
      '--max-sequences',
      'with --scheduling request there is no decode loop',
    ],
    [
      ['serve', '--model', MODEL, '--scheduling', 'request', '--max-step-tokens', '64'],
      '--max-step-tokens',
      'with --scheduling request there is no decode loop (each batch is one generate call over whole prompts)',
    ],
    [
      ['serve', '--model', MODEL, '--scheduling', 'request', '--prefix-cache-mb', '8'],
      '--prefix-cache-mb',
      'with --scheduling request there is no decode loop',
    ],
    [
      ['worker', ...QUEUE, '--scheduling', 'request', '--prefix-cache-mb', '0'],
      '--prefix-cache-mb',
      'with --scheduling request there is no decode loop',
    ],
    [['serve', ...QUEUE, '--max-step-tokens', '64'], '--max-step-tokens', 'a web replica (--queue) runs no model'],
    [['serve', ...QUEUE, '--prefix-cache-mb', '8'], '--prefix-cache-mb', 'a web replica (--queue) runs no model'],
    [
      ['serve', '--model', MODEL, '--worker-grace-ms', '1000'],
      '--worker-grace-ms',
      'with --scheduling continuous the server runs its model itself: only a web replica (--queue) waits for workers',
    ],
  ])('refuses %j at once, naming the flag, with exit code 1', async (args, flag, why) => {
    const { code, stdout, stderr } = await run(args);
    expect(code).toBe(1);
    expect(stderr).toContain(`error: ${flag} has no effect here: ${why}`);
    expect(stdout).toBe(''); // nothing started, nothing logged
  });

  it.each([
    [
      ['--max-step-tokens', '1'],
      "error: option '--max-step-tokens <n>' argument '1' is invalid. Expected an integer from 2 up.",
    ],
    [
      ['--prefix-cache-mb', '-1'],
      "error: option '--prefix-cache-mb <mb>' argument '-1' is invalid. Expected a number of MiB >= 0",
    ],
    [
      ['--max-step-tokens', '16'],
      'error: --max-step-tokens (16) must exceed --max-sequences (32): a step decodes every running row and needs room',
    ],
    [
      ['--max-step-tokens', '8', '--max-sequences', '8'],
      'error: --max-step-tokens (8) must exceed --max-sequences (8)',
    ],
    [
      ['--task', 'feature-extraction', '--prefix-cache-mb', '8'],
      'error: --prefix-cache-mb does not apply to --task feature-extraction',
    ],
  ])('refuses the loop budgets %j, naming them, before starting', async (flags, message) => {
    const { code, stdout, stderr } = await run(['serve', '--model', MODEL, ...flags]);
    expect(code).toBe(1);
    expect(stderr).toContain(message);
    expect(stdout).toBe('');
  });

  it.each([
    [
      ['--dtype', 'q3'],
      "error: option '--dtype <dtype>' argument 'q3' is invalid. Allowed choices are auto, q8, int8, uint8, q4, bnb4, fp32, q4f16, fp16.",
    ],
    [
      ['--dtype', 'q4'],
      `dtype 'q4' needs onnx/model_q4.onnx or onnx/decoder_model_merged_q4.onnx in ${MODEL}; it has fp32 (onnx/model.onnx)`,
    ],
  ])(
    'worker %j: refuses a dtype the folder has no file for, naming its dtypes, with exit code 1',
    async (flags, message) => {
      // The worker loads its model before it connects (the queue's port is closed: it would fail there otherwise).
      const { code, stderr } = await run(['worker', '--queue', 'redis://127.0.0.1:1', '--model', MODEL, ...flags]);
      expect(code).toBe(1);
      expect(stderr).toContain(message);
      expect(stderr).not.toMatch(/\n\s+at /);
    },
  );

  it('documents the loop budgets in --help', async () => {
    for (const command of ['serve', 'worker']) {
      const { code, stdout } = await run([command, '--help']);
      expect(code).toBe(0);
      const help = stdout.replaceAll(/\s+/g, ' ');
      expect(help).toContain(
        '--max-step-tokens <n> --scheduling continuous: the most tokens one decode-loop step runs',
      );
      expect(help).toContain('(default: 64, or twice --max-sequences when that is more; must exceed --max-sequences)');
      expect(help).toContain("--prefix-cache-mb <mb> --scheduling continuous: each worker thread's prefix KV cache");
      expect(help).toContain('(default: 64; 0: none)');
    }
  });

  it('prints its version with --version', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    const { code, stdout } = await run(['--version']);
    expect(code).toBe(0);
    expect(stdout.trim()).toBe(version);
  });

  it('refuses a missing model directory at once, naming the path', async () => {
    const missing = join(scratch, 'no-such-model');
    const { code, stdout, stderr } = await run(['serve', '--model', missing]);
    expect(code).toBe(1);
    expect(stderr.trim()).toBe(`error: Model directory not found: ${missing}`);
    expect(stdout).toBe(''); // nothing was started
  });

  it('accepts a hub id only where it is already on disk, and never downloads', async () => {
    const { code, stderr } = await run(['serve', '--model', 'raincandy-u/TinyStories-656K', '--models-dir', scratch]);
    expect(code).toBe(1);
    expect(stderr).toContain(
      `is looked up as ${join(scratch, 'raincandy-u/TinyStories-656K')}; models are never downloaded`,
    );
  });

  it('prints why a model fails to load and exits 1 instead of hanging', async () => {
    const broken = join(scratch, 'broken-model');
    await cp(MODEL, broken, { recursive: true });
    await writeFile(join(broken, 'onnx', 'model.onnx'), 'not an onnx graph');
    const { code, stderr } = await run(['serve', '--model', broken, '--port', '0']);
    expect(code).toBe(1);
    expect(stderr).toContain(`Failed to load the text-generation model from "${broken}"`);
  });

  it('serves the Koa example on a free port, answers the query script in batches, and exits 0 on SIGTERM', async () => {
    const args = [BIN, 'serve', '--model', MODEL, '--framework', 'koa', '--port', '0', '--max-sequences', '4'];
    // A prefix cache of three 16-token blocks of this model (16,448 bytes each).
    args.push('--max-step-tokens', '24', '--prefix-cache-mb', '0.05');
    const server = await startServerProcess({ args, env: { ...process.env, PORT: '0' }, ready: READY });
    const story = await fetch(`${server.url}/?text=Once+upon+a+time`);
    expect(story.status).toBe(200);
    expect(await story.text()).toMatch(/^Once upon a time \S/);
    const completion = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'The cat ', max_tokens: 4 }),
    });
    expect(((await completion.json()) as { object: string }).object).toBe('text_completion');
    // The tutorial's 9 parallel queries, with the repository's query script (`pnpm query`).
    const query = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--import', 'tsx', QUERY_SCRIPT, server.url], (error, stdout) =>
        error ? reject(error) : resolve(stdout),
      );
    });
    const answers = [...query.matchAll(/^\[200, batch (\S+) of (\d+)\] \S/gm)];
    expect(answers).toHaveLength(9);
    // Exactly the tutorial's nine prompts, each once (each story starts with its prompt).
    const stories = [...query.matchAll(/^\[200, batch \S+ of \d+\] (.*)$/gm)].map((match) => match[1] as string);
    expect(RAY_TUTORIAL_PROMPTS).toHaveLength(9);
    for (const prompt of RAY_TUTORIAL_PROMPTS)
      expect(stories.filter((story) => story.startsWith(prompt))).toHaveLength(1);
    // Continuous scheduling: decode steps of at most 4 rows (`--max-sequences 4`), each carried by no more
    // queries than it had rows, and shared.
    const sizes = new Map(answers.map((match) => [match[1], Number(match[2])]));
    expect([...sizes.values()].every((size) => size >= 1 && size <= 4)).toBe(true);
    for (const [id, size] of sizes) expect(answers.filter((match) => match[1] === id).length).toBeLessThanOrEqual(size);
    expect(Math.max(...sizes.values())).toBeGreaterThan(1);
    expect(query).toMatch(/^Batches seen: batch w0-[0-9a-f]{4}:\d+: size \d \(\d of these queries\)(, .+)*$/m);
    // The prefix cache on /metrics: every prompt so far is shorter than a block. A ~41-token prompt stores two
    // blocks, the same prompt again reuses both (32 tokens), and another one of its length stores two more, evicting
    // the least recently used block of the first.
    const lily =
      'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her dog. ';
    const tom =
      'One day, a boy named Tom found a big red box under his bed. He opened it and saw a shiny toy car inside it. ';
    for (const prompt of [lily + tom, lily + tom, tom + lily]) {
      const answer = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: 2 }),
      });
      expect(answer.status).toBe(200);
    }
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const cache = ['lookups_total', 'hits_total', 'tokens_total', 'evictions_total', 'bytes'].flatMap((metric) =>
      samplesOf(metrics, `microbatch_prefix_cache_${metric}`),
    );
    expect(cache).toEqual([
      'microbatch_prefix_cache_lookups_total{name="inference"} 14',
      'microbatch_prefix_cache_hits_total{name="inference"} 1',
      'microbatch_prefix_cache_tokens_total{name="inference"} 32',
      'microbatch_prefix_cache_evictions_total{name="inference"} 1',
      `microbatch_prefix_cache_bytes{name="inference"} ${3 * 16_448}`,
    ]);
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    // Not on a terminal, the CLI logs JSON lines (pino): the settings, the decode loop and the shutdown as fields.
    const lines = server.jsonLines() as Array<Record<string, unknown>>;
    expect(lines.find((line) => line.msg === 'microbatch serve')).toMatchObject({
      model: 'tinystories-656k',
      task: 'text-generation',
      framework: 'koa',
      // What runs, read back: the batcher hands the loop one request at a time; the loop's rows are 4.
      maxBatchSize: 1,
      maxSequences: 4,
      maxStepTokens: 24,
      prefixCacheMb: 0.05,
      scheduling: 'continuous',
    });
    // Continuous scheduling: the loop's activity at most once a second, no single-request "batch" records; every
    // sequence that joined (the story, the completion, the nine queries, the three long prompts) left, at most 4 rows a step.
    const loop = lines.filter((line) => line.msg === 'decode loop');
    expect(loop[0]).toMatchObject({
      pool: 'inference',
      steps: expect.any(Number),
      tokensPerSecond: expect.any(Number),
    });
    expect(loop.reduce((sum, line) => sum + Number(line.joined), 0)).toBe(14);
    expect(loop.reduce((sum, line) => sum + Number(line.left), 0)).toBe(14);
    expect(Math.max(...loop.map((line) => Number(line.maxRows)))).toBe(Math.max(...sizes.values()));
    expect(lines.some((line) => line.msg === 'batch')).toBe(false);
    expect(lines.at(-1)).toMatchObject({ level: 30, msg: 'drained and closed; exiting' });
  });
});
