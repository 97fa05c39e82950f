// `pnpm bench:embeddings`: tokens/s of `POST /v1/embeddings` (one text per request, as a RAG indexer or a search box
// sends them) from `microbatch serve --task feature-extraction`, batched (`--max-batch-size 64`, cost in tokens)
// vs unbatched (`--max-batch-size 1`: one model call per request), at 1, 16 and 64 concurrent connections, and the
// offline limit: the same model called directly in its worker thread with full batches of 64 inputs of similar
// length back to back (no HTTP, no batcher, least padding). The model is a BERT-shaped encoder generated here (the real MiniLM WordPiece tokenizer, random
// weights; `BENCH_HIDDEN` sets its width). Rounds interleave the two servers, so drift on a shared machine hits both;
// the medians and ratios are printed and written to bench/results/embeddings.json.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createWorkerPool, loadTokenizer } from '@microbatch/inference';
import type { OnnxInput } from '@microbatch/inference';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { writeBertEncoder } from '../packages/inference/test/helpers/bert-encoder.js';
import { runLoad } from './lib/load.js';
import { machineInfo } from './lib/machine.js';
import { median, round } from './lib/stats.js';

const BIN = fileURLToPath(new URL('../packages/cli/bin/microbatch.js', import.meta.url));
const OUT = fileURLToPath(new URL('./results/embeddings.json', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const HIDDEN = Number(process.env.BENCH_HIDDEN ?? 384);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCIES = [1, 16, 64] as const;
const VARIANTS = ['batched', 'unbatched'] as const;
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
    const dir = await writeBertEncoder(join(scratch, 'bench-encoder'), { hidden: HIDDEN });
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
      const size = variant === 'batched' ? '64' : '1';
      const server = await startServerProcess({
        args: [
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
        ].concat(['--max-batch-size', size, '--max-batch-cost', '8192']),
        env: { ...process.env },
        ready: READY,
        stderrTailChars: 20_000,
      });
      servers.set(variant, server);
      const port = Number(new URL(server.url).port);
      await runLoad({ port, path: '/v1/embeddings', bodies, connections: 16, seconds: 1, counted: false });
    }
    const runs = new Map<string, number[]>();
    for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex += 1) {
      offlineRuns.push(await meter.measure());
      console.error(`round ${roundIndex + 1} offline: ${Math.round(offlineRuns.at(-1) ?? 0)} tokens/s`);
      for (const connections of CONCURRENCIES) {
        const order = roundIndex % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
        for (const variant of order) {
          const port = Number(new URL((servers.get(variant) as ServerProcess).url).port);
          const result = await runLoad({ port, path: '/v1/embeddings', bodies, connections, seconds: SECONDS });
          if (result.non2xx > 0 || result.errors > 0) {
            const server = servers.get(variant) as ServerProcess;
            const notes = server.jsonLines().filter((line) => (line as { msg?: string }).msg !== 'batch');
            throw new Error(
              `${variant} c=${connections}: ${result.non2xx} non-2xx, ${result.errors} errors; the server said ${JSON.stringify(notes.slice(-3))}`,
            );
          }
          const key = `${variant}:${connections}`;
          runs.set(key, [...(runs.get(key) ?? []), result.itemsPerS * meanTokens]);
          console.error(`round ${roundIndex + 1} ${key}: ${Math.round(result.itemsPerS * meanTokens)} tokens/s`);
        }
      }
    }
    const offline = median(offlineRuns);
    const rows = CONCURRENCIES.map((connections) => {
      const batched = median(runs.get(`batched:${connections}`) ?? []);
      const unbatched = median(runs.get(`unbatched:${connections}`) ?? []);
      return {
        connections,
        batchedTokensPerS: round(batched, 0),
        unbatchedTokensPerS: round(unbatched, 0),
        batchedOverUnbatched: round(batched / unbatched, 2),
        batchedOverOffline: round(batched / offline, 2),
      };
    });
    console.log(
      `embeddings: hidden ${HIDDEN}, mean ${meanTokens.toFixed(1)} tokens per input, ${ROUNDS} rounds of ${SECONDS} s`,
    );
    console.log(`offline limit (batches of 64, in a worker; median of the rounds): ${Math.round(offline)} tokens/s`);
    console.log('connections | batched tokens/s | unbatched tokens/s | batched/unbatched | batched/offline');
    for (const row of rows) {
      console.log(
        `${row.connections} | ${row.batchedTokensPerS} | ${row.unbatchedTokensPerS} | ${row.batchedOverUnbatched}x | ${row.batchedOverOffline}x`,
      );
    }
    await writeFile(
      OUT,
      `${JSON.stringify({ machine: machineInfo(), hidden: HIDDEN, meanTokens, offlineTokensPerS: Math.round(offline), rows }, null, 2)}\n`,
    );
  } finally {
    await Promise.all([...servers.values()].map((server) => server.stop()));
    await Promise.all(closers.map((close) => close()));
    await rm(scratch, { recursive: true, force: true });
  }
}

await main();
