// `pnpm bench:rejection`: what invalid requests cost everyone else. One `microbatch serve` (Express) process; first
// unloaded, then while 16 clients each send, once a second, a body of 16 prompts that are all past the context (the
// attack of issue 22: each is refused 400). Measured both times, in the same run: the `/healthz` p99 and the p50 of
// ordinary 4-token completions. Printed and written as ratios loaded / unloaded (target: both within 1.5x).
import { request } from 'node:http';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startServerProcess } from '@microbatch/test-kit';
import { REPO_ROOT, RESULTS_DIR, TEXT_MODEL_DIR } from './lib/paths.js';
import { percentile, round } from './lib/stats.js';

const PHASE_MS = Number(process.env.REJECTION_PHASE_MS ?? 8_000);
const ATTACKERS = 16;
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
// About 2.4 KB each, well past 512 tokens with the bundled tokenizer: 16 of them make one ~38 KB body.
const OVER_CONTEXT = 'xq zv '.repeat(400);

function post(url: string, path: string, body: unknown): Promise<{ status: number; ms: number }> {
  return call(url, path, 'POST', JSON.stringify(body));
}

function call(url: string, path: string, method: string, body?: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, url), {
      method,
      agent: false,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
    });
    req.end(body);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Probes and ordinary completions for `PHASE_MS`, with `attackers` clients sending over-context bodies meanwhile. */
async function phase(url: string, attackers: number) {
  const until = performance.now() + PHASE_MS;
  const probes: number[] = [];
  const completions: number[] = [];
  const refused: Record<string, number> = {};
  const probe = async () => {
    while (performance.now() < until) {
      probes.push((await call(url, '/healthz', 'GET')).ms);
      await sleep(20);
    }
  };
  const complete = async () => {
    while (performance.now() < until) {
      const { status, ms } = await post(url, '/v1/completions', { prompt: 'Once upon a time ', max_tokens: 4 });
      if (status === 200) completions.push(ms);
    }
  };
  const attack = async (index: number) => {
    await sleep((1_000 * index) / attackers); // spread over the second
    while (performance.now() < until) {
      const started = performance.now();
      const { status } = await post(url, '/v1/completions', { prompt: Array(16).fill(OVER_CONTEXT), max_tokens: 16 });
      refused[status] = (refused[status] ?? 0) + 1;
      await sleep(Math.max(0, 1_000 - (performance.now() - started)));
    }
  };
  await Promise.all([probe(), complete(), ...Array.from({ length: attackers }, (_, i) => attack(i))]);
  probes.sort((a, b) => a - b);
  completions.sort((a, b) => a - b);
  return {
    healthz_p99_ms: round(percentile(probes, 99), 2),
    completion_p50_ms: round(percentile(completions, 50), 2),
    probes: probes.length,
    completions: completions.length,
    attack_answers_by_status: refused,
  };
}

const server = await startServerProcess({
  args: [join(REPO_ROOT, 'packages/cli/bin/microbatch.js'), 'serve', '--model', TEXT_MODEL_DIR, '--port', '0'],
  cwd: REPO_ROOT,
  env: { ...process.env, NODE_ENV: 'production' },
  ready: READY,
});
try {
  await phase(server.url, 0); // warm-up
  const unloaded = await phase(server.url, 0);
  const loaded = await phase(server.url, ATTACKERS);
  const result = {
    unloaded,
    loaded,
    ratios: {
      healthz_p99: round(loaded.healthz_p99_ms / unloaded.healthz_p99_ms, 2),
      completion_p50: round(loaded.completion_p50_ms / unloaded.completion_p50_ms, 2),
    },
    target: 'both ratios <= 1.5',
    phase_ms: PHASE_MS,
    attackers: ATTACKERS,
  };
  console.log(JSON.stringify(result, null, 2));
  await writeFile(join(RESULTS_DIR, 'rejection.json'), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  await server.stop();
}
