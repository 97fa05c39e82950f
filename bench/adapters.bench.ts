// `pnpm bench:adapters`: what `batchRoute` costs per request when the model costs nothing. For Express, Koa,
// Fastify and Hono, a
// plain route handler vs `batchRoute` with an instant batch handler, both answering `POST /add`, each in its own
// server process, loaded by autocannon (64 connections) from this process. Rounds are interleaved and rotated so that
// drift on a shared machine hits every variant alike; the medians and the batched/plain ratios are printed and
// written to bench/results/adapters.json.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Child, startChild } from './lib/child.js';
import { type LoadResult, runLoad } from './lib/load.js';
import { machineInfo } from './lib/machine.js';
import { median, round } from './lib/stats.js';

const ALL_FRAMEWORKS = ['express', 'koa', 'fastify', 'hono'] as const;
type Framework = (typeof ALL_FRAMEWORKS)[number];
/** `BENCH_FRAMEWORKS=fastify,hono` measures only those (a quicker look); the default is all four, in one run. */
const FRAMEWORKS: readonly Framework[] = process.env.BENCH_FRAMEWORKS
  ? ALL_FRAMEWORKS.filter((framework) => (process.env.BENCH_FRAMEWORKS as string).split(',').includes(framework))
  : ALL_FRAMEWORKS;
const VARIANTS = FRAMEWORKS.flatMap((framework) => [`${framework}-plain`, `${framework}-batched`] as const);
type Variant = `${Framework}-${'plain' | 'batched'}`;

const CONNECTIONS = 64;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const WARMUP_SECONDS = 1;
const TARGET = 0.9;
const SERVER = fileURLToPath(new URL('./servers/adapter-server.ts', import.meta.url));
const OUT = fileURLToPath(new URL('./results/adapters.json', import.meta.url));
const BODIES = Array.from({ length: 64 }, (_, number) => ({ number }));

async function main(): Promise<void> {
  const servers = new Map<Variant, { child: Child; port: number }>();
  try {
    for (const variant of VARIANTS) {
      const child = startChild(SERVER, [variant], {});
      const { port } = await child.nextJson<{ port: number }>(
        (value) => typeof (value as { port?: unknown }).port === 'number',
        60_000,
      );
      servers.set(variant, { child, port });
      // Warm up (JIT, sockets) before any counted round.
      await runLoad({
        port,
        path: '/add',
        bodies: BODIES,
        connections: CONNECTIONS,
        seconds: WARMUP_SECONDS,
        counted: false,
      });
    }
    const runs = new Map<Variant, LoadResult[]>(VARIANTS.map((variant) => [variant, []]));
    for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex += 1) {
      // Rotate the order each round, so no variant always runs first (or right after the same neighbour).
      const order = VARIANTS.map((_, index) => VARIANTS[(index + roundIndex) % VARIANTS.length] as Variant);
      for (const variant of order) {
        const { port } = servers.get(variant) as { port: number };
        const result = await runLoad({
          port,
          path: '/add',
          bodies: BODIES,
          connections: CONNECTIONS,
          seconds: SECONDS,
        });
        if (result.non2xx > 0 || result.errors > 0) {
          throw new Error(
            `${variant}: ${result.non2xx} non-2xx answers and ${result.errors} errors: the bench measures a broken server`,
          );
        }
        (runs.get(variant) as LoadResult[]).push(result);
        process.stdout.write(
          `round ${roundIndex + 1}/${ROUNDS} ${variant.padEnd(16)} ${round(result.itemsPerS, 0)} requests/s, p50 ${round(result.p50Ms, 2)} ms, p99 ${round(result.p99Ms, 2)} ms\n`,
        );
      }
    }
    const rps = (variant: Variant): number =>
      round(median((runs.get(variant) as LoadResult[]).map((result) => result.itemsPerS)), 0);
    const p50 = (variant: Variant): number =>
      round(median((runs.get(variant) as LoadResult[]).map((result) => result.p50Ms)), 2);
    // Per-round ratios as well as the ratio of medians: on a shared machine the spread tells how far to trust them.
    const roundRatios = (framework: Framework): number[] =>
      (runs.get(`${framework}-batched`) as LoadResult[]).map((batched, index) =>
        round(batched.itemsPerS / ((runs.get(`${framework}-plain`) as LoadResult[])[index] as LoadResult).itemsPerS, 3),
      );
    const figures: Record<string, number> = {};
    for (const framework of FRAMEWORKS) {
      figures[`${framework}_plain_rps`] = rps(`${framework}-plain`);
      figures[`${framework}_batched_rps`] = rps(`${framework}-batched`);
    }
    for (const framework of FRAMEWORKS) {
      figures[`${framework}_ratio`] = round(rps(`${framework}-batched`) / rps(`${framework}-plain`), 3);
    }
    const results = {
      ...figures,
      target_ratio: TARGET,
      detail: {
        connections: CONNECTIONS,
        rounds: ROUNDS,
        seconds_per_run: SECONDS,
        round_ratios: Object.fromEntries(FRAMEWORKS.map((framework) => [framework, roundRatios(framework)])),
        p50_ms: Object.fromEntries(VARIANTS.map((variant) => [variant, p50(variant)])),
        handler: 'instant: async (numbers) => numbers.map((n) => n + 1)',
        batcher_options: 'defaults',
        note: 'server and load generator share the machine (2 cores): ratios are measured within one run; absolute figures are not comparable across machines',
      },
      machine: machineInfo(),
      date: new Date().toISOString(),
    };
    // A partial run (BENCH_FRAMEWORKS) prints its figures but keeps the file of the last full run.
    if (FRAMEWORKS.length === ALL_FRAMEWORKS.length) await writeFile(OUT, `${JSON.stringify(results, null, 2)}\n`);
    for (const framework of FRAMEWORKS) {
      const ratio = figures[`${framework}_ratio`] as number;
      console.log(
        `${framework}: plain ${figures[`${framework}_plain_rps`]} requests/s, batched ${figures[`${framework}_batched_rps`]} requests/s → ${ratio}x (target ≥ ${TARGET}x: ${ratio >= TARGET ? 'met' : 'MISSED'}; per round ${roundRatios(framework).join(', ')})`,
      );
    }
    if (FRAMEWORKS.length === ALL_FRAMEWORKS.length) console.log(`wrote ${OUT}`);
  } finally {
    await Promise.all([...servers.values()].map(({ child }) => child.stop()));
  }
}

await main();
