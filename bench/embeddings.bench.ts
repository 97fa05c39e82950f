// `pnpm bench:embeddings`: tokens/s of `POST /v1/embeddings` (one text per request, as a RAG indexer or a search box
// sends them) from `microbatch serve --task feature-extraction`, batched (`--max-batch-size 64`, cost in tokens)
// vs unbatched (`--max-batch-size 1`: one model call per request), and the two servers a user would write without
// microbatch on the same model (`servers/transformers-peer.ts`: Express + transformers.js's
// `pipeline('feature-extraction')` per request, and the same behind a DataLoader), at 1, 16 and 64 concurrent
// connections: tokens/s, p50 / p99, and the p99 of `GET /healthz` sampled while loaded. The offline limit: the same
// model called directly in its worker thread with full batches of 64 inputs of similar length back to back (no
// HTTP, no batcher, least padding). The model is the MiniLM-L6-shaped embedder of `pnpm bench:models` (written here
// if missing); `BENCH_MODEL=toy` uses the one-layer encoder of the tests instead (`BENCH_HIDDEN` sets its width).
// Rounds interleave the servers, so drift on a shared machine hits all; the medians and ratios are printed and
// written to bench/results/embeddings.json.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createWorkerPool, loadTokenizer } from '@microbatch/inference';
import type { OnnxInput } from '@microbatch/inference';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { writeBertEncoder } from '../packages/inference/test/helpers/bert-encoder.js';
import { runLoad } from './lib/load.js';
import { ensureMiniLm } from './lib/minilm-model.js';
import { sampleHealth } from './lib/health-sampler.js';
import { machineInfo } from './lib/machine.js';
import { median, round } from './lib/stats.js';

const BIN = fileURLToPath(new URL('../packages/cli/bin/microbatch.js', import.meta.url));
const OUT = fileURLToPath(new URL('./results/embeddings.json', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const HIDDEN = Number(process.env.BENCH_HIDDEN ?? 384);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCIES = [1, 16, 64] as const;
const VARIANTS = ['batched', 'unbatched', 'per-request', 'dataloader'] as const;
const PEER = fileURLToPath(new URL('./servers/transformers-peer.ts', import.meta.url));
const TOY = process.env.BENCH_MODEL === 'toy';
type Variant = (typeof VARIANTS)[number];

/** Deterministic sentences of 4 to 40 words. */
function texts(count: number): string[] {
  const words =
    'the a cat dog model batch token search index vector query server request answer fast small large'.split(' ');
  let state = 7;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
  return Array.from({ length: count }, () =>
    Array.from({ length: 4 + Math.floor(next() * 37) }, () => words[Math.floor(next() * words.length)]).join(' '),
  );
}

/**
 * The offline limit: full batches of 64 similar-length inputs run directly on a pool of the same model for `SECONDS`,
 * in tokens/s. Measured
 * once per round between the servers' runs, so it sees the same machine as they do.
 */
function offlineMeter(dir: string, inputs: readonly OnnxInput[], tokens: readonly number[]) {
  const pool = createWorkerPool({
    runner: { task: 'onnx', model: join(dir, 'onnx', 'model.onnx'), outputs: ['last_hidden_state'] },
  });
  let next = 0;
  const batch = () =>
    Array.from({ length: 64 }, () => {
      const index = next++ % inputs.length;
      return { input: inputs[index] as OnnxInput, tokens: tokens[index] as number };
    });
  return {
    ready: pool.ready.then(async () => {
      for (let warm = 0; warm < 3; warm += 1) await pool.run(batch().map((item) => item.input));
    }),
    async measure(): Promise<number> {
      let counted = 0;
      const started = performance.now();
      while (performance.now() - started < SECONDS * 1000) {
        const items = batch();
        await pool.run(items.map((item) => item.input));
        counted += items.reduce((sum, item) => sum + item.tokens, 0);
      }
      return counted / ((performance.now() - started) / 1000);
    },
    close: () => pool.close(),
  };
}

async function main(): Promise<void> {
  const scratch = await mkdtemp(join(tmpdir(), 'microbatch-bench-embeddings-'));
  const servers = new Map<Variant, ServerProcess>();
  const closers: (() => Promise<void>)[] = [];
  try {
    const dir = TOY
      ? await writeBertEncoder(join(scratch, 'bench-encoder'), { hidden: HIDDEN })
      : (await ensureMiniLm('embedder')).dir;
    const sentences = texts(256);
    const tokenizer = await loadTokenizer(dir);
    const tokens = sentences.map((text) => tokenizer.encode(text).length);
    const meanTokens = tokens.reduce((sum, count) => sum + count, 0) / tokens.length;
    const bodies = sentences.map((input) => ({ input, encoding_format: 'float' }));
    // The limit pads as little as possible: inputs sorted by length, so each batch of 64 holds similar lengths.
    const byLength = sentences.map((text) => tokenizer.encode(text)).sort((a, b) => a.length - b.length);
    const meter = offlineMeter(
      dir,
      byLength.map((ids) => ({ input_ids: ids, token_type_ids: ids.map(() => 0) })),
      byLength.map((ids) => ids.length),
    );
    closers.push(() => meter.close());
    await meter.ready;
    const offlineRuns: number[] = [];
    for (const variant of VARIANTS) {
      const args =
        variant === 'batched' || variant === 'unbatched'
          ? [
              BIN,
              'serve',
              '--task',
              'feature-extraction',
              '--model',
              dir,
              '--port',
              '0',
              '--log-format',
              'json',
            ].concat(['--max-batch-size', variant === 'batched' ? '64' : '1', '--max-batch-cost', '8192'])
          : ['--import', 'tsx', PEER, '--model', dir, '--mode', variant, '--task', 'feature-extraction'];
      const server = await startServerProcess({
        args,
        env: { ...process.env },
        ready: READY,
        stderrTailChars: 20_000,
      });
      servers.set(variant, server);
      const port = Number(new URL(server.url).port);
      await runLoad({ port, path: '/v1/embeddings', bodies, connections: 16, seconds: 1, counted: false });
    }
    const runs = new Map<string, { tokensPerS: number; p50Ms: number; p99Ms: number; healthP99Ms: number }[]>();
    for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex += 1) {
      offlineRuns.push(await meter.measure());
      console.error(`round ${roundIndex + 1} offline: ${Math.round(offlineRuns.at(-1) ?? 0)} tokens/s`);
      for (const connections of CONCURRENCIES) {
        const order = roundIndex % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
        for (const variant of order) {
          const server = servers.get(variant) as ServerProcess;
          const port = Number(new URL(server.url).port);
          const health = sampleHealth(server.url);
          const result = await runLoad({ port, path: '/v1/embeddings', bodies, connections, seconds: SECONDS });
          const healthP99Ms = await health.stop();
          if (result.non2xx > 0 || result.errors > 0) {
            const notes = server.jsonLines().filter((line) => (line as { msg?: string }).msg !== 'batch');
            throw new Error(
              `${variant} c=${connections}: ${result.non2xx} non-2xx, ${result.errors} errors; the server said ${JSON.stringify(notes.slice(-3))}`,
            );
          }
          const key = `${variant}:${connections}`;
          const run = {
            tokensPerS: result.itemsPerS * meanTokens,
            p50Ms: result.p50Ms,
            p99Ms: result.p99Ms,
            healthP99Ms,
          };
          runs.set(key, [...(runs.get(key) ?? []), run]);
          console.error(
            `round ${roundIndex + 1} ${key}: ${Math.round(run.tokensPerS)} tokens/s, p50 ${round(run.p50Ms, 1)} ms, p99 ${round(run.p99Ms, 1)} ms, /healthz p99 ${round(healthP99Ms, 1)} ms`,
          );
        }
      }
    }
    const offline = median(offlineRuns);
    const med = (variant: Variant, connections: number, field: 'tokensPerS' | 'p50Ms' | 'p99Ms' | 'healthP99Ms') =>
      median((runs.get(`${variant}:${connections}`) ?? []).map((run) => run[field]));
    const rows = CONCURRENCIES.flatMap((connections) =>
      VARIANTS.map((variant) => {
        const tokensPerS = med(variant, connections, 'tokensPerS');
        return {
          connections,
          server: variant,
          tokensPerS: round(tokensPerS, 0),
          p50Ms: round(med(variant, connections, 'p50Ms'), 1),
          p99Ms: round(med(variant, connections, 'p99Ms'), 1),
          healthzP99Ms: round(med(variant, connections, 'healthP99Ms'), 1),
          overOffline: round(tokensPerS / offline, 2),
          batchedOverThis: round(med('batched', connections, 'tokensPerS') / tokensPerS, 2),
        };
      }),
    );
    const model = TOY ? `one-layer BERT-shaped encoder, hidden ${HIDDEN}` : 'MiniLM-L6-shaped embedder (bench:models)';
    console.log(
      `embeddings: ${model}, mean ${meanTokens.toFixed(1)} tokens per input, ${ROUNDS} rounds of ${SECONDS} s`,
    );
    console.log(`offline limit (batches of 64, in a worker; median of the rounds): ${Math.round(offline)} tokens/s`);
    console.log('connections | server | tokens/s | p50 ms | p99 ms | /healthz p99 ms | x offline | batched / this');
    for (const row of rows) {
      console.log(
        `${row.connections} | ${row.server} | ${row.tokensPerS} | ${row.p50Ms} | ${row.p99Ms} | ${row.healthzP99Ms} | ${row.overOffline}x | ${row.batchedOverThis}x`,
      );
    }
    await writeFile(
      OUT,
      `${JSON.stringify({ machine: machineInfo(), model, meanTokens, offlineTokensPerS: Math.round(offline), rows }, null, 2)}\n`,
    );
  } finally {
    await Promise.all([...servers.values()].map((server) => server.stop()));
    await Promise.all(closers.map((close) => close()));
    await rm(scratch, { recursive: true, force: true });
  }
}

await main();
