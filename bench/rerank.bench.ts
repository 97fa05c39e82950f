// `pnpm bench:rerank`: pairs/s of `POST /v1/rerank` (a query and 10 documents per request, as a search backend
// reranks its first hits) from `microbatch serve --task rerank` on the MiniLM-L6-shaped cross-encoder of
// `pnpm bench:models` (written here if missing), batched (`--max-batch-size 64`: pairs of concurrent requests share
// padded calls, by pair tokens) vs unbatched (`--max-batch-size 1`: one model call per pair), and the servers a user
// would write without microbatch (`servers/transformers-peer.ts --task rerank`: Express + transformers.js, each
// request's pairs in one padded call, or pairs of one tick behind a DataLoader), at 1, 16 and 64 connections:
// pairs/s, p50 / p99, and `/healthz` p99 sampled while loaded. Rounds interleave the servers; medians and ratios
// are printed and written to bench/results/rerank.json.
// A window must outlast the work its connections hold: each server's window at c connections is at least
// `BENCH_WAVES` (3) turnovers of them, c x its per-request time measured at c=1 in the same round (capped at
// `BENCH_MAX_SECONDS`, 90). A round in which fewer than 2 answers per connection completed inside the window is
// invalid: it is said so and measured once more, in a window of (BENCH_WAVES + 1) turnovers at the rate it measured
// (connections / answers per second; at least twice the first); still invalid, it is left out of the medians (a row with no valid round says `invalid`). A round
// with a failed request (non-2xx, reset, 30 s timeout) is invalid the same way, measured again in the same window.
// Before each window, one request is answered alone, so no server still works through the last window's requests.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { sampleHealth } from './lib/health-sampler.js';
import { runLoad } from './lib/load.js';
import { machineInfo } from './lib/machine.js';
import { ensureMiniLm } from './lib/minilm-model.js';
import { median, round } from './lib/stats.js';

const BIN = fileURLToPath(new URL('../packages/cli/bin/microbatch.js', import.meta.url));
const PEER = fileURLToPath(new URL('./servers/transformers-peer.ts', import.meta.url));
const OUT = fileURLToPath(new URL('./results/rerank.json', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WAVES = Number(process.env.BENCH_WAVES ?? 3);
const MAX_SECONDS = Number(process.env.BENCH_MAX_SECONDS ?? 90);
/** Answers per connection, on average, that a valid round completes inside its window. */
const MIN_ANSWERS_PER_CONNECTION = 2;
/** Measurements of one server at one concurrency in a round: the first, and one more if its window was too short. */
const MAX_ATTEMPTS = 2;
const DOCUMENTS = 10;
const CONCURRENCIES = [1, 16, 64] as const;
const VARIANTS = ['batched', 'unbatched', 'per-request', 'dataloader'] as const;
type Variant = (typeof VARIANTS)[number];

/** Deterministic queries of 3 to 8 words, each with 10 documents of 6 to 20 words. */
function bodies(count: number): { query: string; documents: string[]; return_documents: boolean }[] {
  const words =
    'the a cat dog model batch token search index vector query server request answer fast small large'.split(' ');
  let state = 11;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
  const sentence = (min: number, spread: number) =>
    Array.from({ length: min + Math.floor(next() * spread) }, () => words[Math.floor(next() * words.length)]).join(' ');
  return Array.from({ length: count }, () => ({
    query: sentence(3, 6),
    documents: Array.from({ length: DOCUMENTS }, () => sentence(6, 15)),
    return_documents: false,
  }));
}

async function main(): Promise<void> {
  const servers = new Map<Variant, ServerProcess>();
  try {
    const { dir } = await ensureMiniLm('cross-encoder');
    const load = bodies(64);
    for (const variant of VARIANTS) {
      const args =
        variant === 'batched' || variant === 'unbatched'
          ? [BIN, 'serve', '--task', 'rerank', '--model', dir, '--port', '0', '--log-format', 'json'].concat([
              '--max-batch-size',
              variant === 'batched' ? '64' : '1',
            ])
          : ['--import', 'tsx', PEER, '--model', dir, '--mode', variant, '--task', 'rerank'];
      const server = await startServerProcess({ args, env: { ...process.env }, ready: READY, stderrTailChars: 20_000 });
      servers.set(variant, server);
      await runLoad({
        port: Number(new URL(server.url).port),
        path: '/v1/rerank',
        bodies: load,
        connections: 4,
        seconds: 1,
        counted: false,
      });
    }
    type Run = { pairsPerS: number; p50Ms: number; p99Ms: number; healthP99Ms: number; seconds: number };
    const runs = new Map<string, Run[]>();
    const invalid = new Map<string, number>();
    for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex += 1) {
      // Each server's time per request alone (its c=1 p50 in this round), from which its longer windows follow.
      const alone = new Map<Variant, number>();
      for (const connections of CONCURRENCIES) {
        const order = roundIndex % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
        for (const variant of order) {
          const server = servers.get(variant) as ServerProcess;
          const key = `${variant}:${connections}`;
          // A window too short for the work its connections hold is measured again once, with one derived from
          // the per-request time it did measure (its p50 at this concurrency).
          let seconds = windowSeconds(connections, alone.get(variant));
          for (let attempt = 1; ; attempt += 1) {
            await settle(server.url, load[0] as object);
            const health = sampleHealth(server.url);
            const result = await runLoad({
              port: Number(new URL(server.url).port),
              path: '/v1/rerank',
              bodies: load,
              connections,
              seconds,
            });
            const healthP99Ms = await health.stop();
            if (connections === 1) alone.set(variant, result.p50Ms);
            const run = {
              pairsPerS: result.itemsPerS * DOCUMENTS,
              p50Ms: result.p50Ms,
              p99Ms: result.p99Ms,
              healthP99Ms,
              seconds,
            };
            // A failed request (a non-2xx answer, a reset or a 30 s timeout) makes the round invalid too: said, and
            // measured again, rather than ending the whole run.
            const failed = result.non2xx + result.errors;
            const short = result.ok < MIN_ANSWERS_PER_CONNECTION * connections;
            const valid = failed === 0 && !short;
            const retry = !valid && attempt < MAX_ATTEMPTS && (failed > 0 || seconds < MAX_SECONDS);
            const why = [
              ...(failed > 0 ? [`${result.non2xx} non-2xx and ${result.errors} failed requests`] : []),
              ...(short
                ? [
                    `${result.ok} answers in the window for ${connections} connections (< ${MIN_ANSWERS_PER_CONNECTION} each)`,
                  ]
                : []),
            ].join(', ');
            console.error(
              `round ${roundIndex + 1} ${key}: ${round(run.pairsPerS, 1)} pairs/s, p50 ${round(run.p50Ms, 1)} ms, p99 ${round(run.p99Ms, 1)} ms, /healthz p99 ${round(healthP99Ms, 1)} ms, window ${round(seconds, 1)} s` +
                (valid ? '' : ` - INVALID: ${why}, ${retry ? 'measured again' : 'left out'}`),
            );
            if (valid) runs.set(key, [...(runs.get(key) ?? []), run]);
            if (valid || !retry) {
              if (!valid) invalid.set(key, (invalid.get(key) ?? 0) + 1);
              break;
            }
            // The time one turnover of the connections took here: connections / answers per second (never NaN,
            // unlike a p50 of no answers; and right for a server that starves some connections).
            const turnoverS = (connections * seconds) / Math.max(result.ok, 1);
            if (short) seconds = Math.min(MAX_SECONDS, Math.max(2 * seconds, (WAVES + 1) * turnoverS));
          }
        }
      }
    }
    const med = (variant: Variant, connections: number, field: keyof Run) =>
      median((runs.get(`${variant}:${connections}`) ?? []).map((run) => run[field]));
    const rows = CONCURRENCIES.flatMap((connections) =>
      VARIANTS.map((variant) => {
        const pairsPerS = med(variant, connections, 'pairsPerS');
        const validRounds = runs.get(`${variant}:${connections}`)?.length ?? 0;
        return {
          connections,
          server: variant,
          validRounds,
          invalidRounds: invalid.get(`${variant}:${connections}`) ?? 0,
          windowS: round(med(variant, connections, 'seconds'), 1),
          pairsPerS: round(pairsPerS, 1),
          p50Ms: round(med(variant, connections, 'p50Ms'), 1),
          p99Ms: round(med(variant, connections, 'p99Ms'), 1),
          healthzP99Ms: round(med(variant, connections, 'healthP99Ms'), 1),
          batchedOverThis: round(med('batched', connections, 'pairsPerS') / pairsPerS, 2),
        };
      }),
    );
    console.log(
      `rerank: MiniLM-L6-shaped cross-encoder, ${DOCUMENTS} documents per request, ${ROUNDS} rounds of ${SECONDS} s`,
    );
    console.log('connections | server | window s | pairs/s | p50 ms | p99 ms | /healthz p99 ms | batched / this');
    for (const row of rows) {
      console.log(
        row.validRounds === 0
          ? `${row.connections} | ${row.server} | invalid: no round completed ${MIN_ANSWERS_PER_CONNECTION} answers per connection in its window`
          : `${row.connections} | ${row.server} | ${row.windowS} | ${row.pairsPerS} | ${row.p50Ms} | ${row.p99Ms} | ${row.healthzP99Ms} | ${row.batchedOverThis}x` +
              (row.invalidRounds > 0 ? ` (${row.invalidRounds} invalid round(s) left out)` : ''),
      );
    }
    await writeFile(OUT, `${JSON.stringify({ machine: machineInfo(), documents: DOCUMENTS, rows }, null, 2)}\n`);
  } finally {
    await Promise.all([...servers.values()].map((server) => server.stop()));
  }
}

/**
 * Waits for one request's answer, so that a server still working through the previous load's requests (whose
 * clients timed out) has finished them before the next window opens.
 */
async function settle(url: string, body: object): Promise<void> {
  const response = await fetch(new URL('/v1/rerank', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(180_000),
  });
  await response.arrayBuffer();
}

/**
 * The window at `connections`: at least {@link WAVES} turnovers of the work its connections hold (`connections` x the
 * server's time per request alone), never under `SECONDS`, at most `MAX_SECONDS` (the validity check catches a
 * window the cap made too short).
 */
function windowSeconds(connections: number, aloneMs: number | undefined): number {
  if (aloneMs === undefined || connections === 1) return SECONDS;
  return Math.min(MAX_SECONDS, Math.max(SECONDS, (WAVES * connections * aloneMs) / 1000));
}

await main();
