// Scale-out over Redis and NATS JetStream (`pnpm bench:scaleout`, both transports in one run; `--transport redis|nats`
// for one): 2 web replicas on loopback, measured against the baseline each replica would have alone (its own model,
// batching only its own traffic), measured in the same run.
//   1. Added latency per item of the queue, no-op handler, concurrency 1: queue p50 - local batcher p50.
//   2. At the same offered load, mean batch size and throughput: per-replica local batching vs the shared queue with
//      1 and with 2 workers.
//   3. A worker SIGKILLed under load: how many requests are lost (the other worker takes its entries over).
// Workers are child processes (this file with `--worker`); replicas are two `createRedisQueue` / `createNatsQueue`
// instances in this process, each with its own connections and reply stream or subject, as two processes would have. The model is simulated
// (a timer of BASE + PER_ITEM x batch size ms): a GPU-like batch cost without eating the 2 cores the load
// generator, Redis, replicas and workers share.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Batcher, createBatcher } from '@microbatch/core';
import { createNatsQueue, createNatsWorker } from '@microbatch/nats';
import { createRedisQueue, createRedisWorker } from '@microbatch/redis';
import { type ChildHandle, startNatsServer, startProcess, startRedisServer } from '@microbatch/test-kit';
import { median, percentile, round } from './lib/stats.js';

const BASE_MS = 20;
const PER_ITEM_MS = 0.5;
const MAX_BATCH = 32;
/** Offered load, items/s over both replicas: well under what a generator on 2 cores sends on time (~500/s). */
const RATE = 300;
const LOAD_SECONDS = 6;
const LATENCY_CALLS = 2_000;
const LATENCY_ROUNDS = 5;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const model = async (inputs: number[]): Promise<number[]> => {
  await sleep(BASE_MS + PER_ITEM_MS * inputs.length);
  return inputs.map((x) => x + 1);
};

/** A transport as the benchmark uses it: a broker of its own, replicas in this process, workers in children. */
interface Transport {
  readonly name: 'redis' | 'nats';
  startBroker(): Promise<{ url: string; stop(): Promise<void> }>;
  replica(
    url: string,
    queue: string,
  ): {
    ready: Promise<void>;
    batcher<I, O>(name: string): Batcher<I, O>;
    close(): Promise<void>;
  };
}

const TRANSPORTS: readonly Transport[] = [
  { name: 'redis', startBroker: startRedisServer, replica: (url, queue) => createRedisQueue({ url, queue }) },
  { name: 'nats', startBroker: startNatsServer, replica: (url, queue) => createNatsQueue({ url, queue }) },
];

if (process.argv.includes('--worker')) {
  // A worker process: the no-op handler or the simulated model, until SIGTERM.
  const { TRANSPORT = 'redis', BROKER_URL = '', QUEUE = '', CLAIM_IDLE_MS = '1000' } = process.env;
  const options = {
    url: BROKER_URL,
    queue: QUEUE,
    maxBatchSize: MAX_BATCH,
    claimIdleMs: Number(CLAIM_IDLE_MS),
    heartbeatMs: 200,
    log: false as const,
    handlers: { noop: async (inputs: number[]) => inputs, model },
  };
  const worker = TRANSPORT === 'nats' ? createNatsWorker(options) : createRedisWorker(options);
  process.once('SIGTERM', () => void worker.close().then(() => process.exit(0)));
  await worker.ready;
  console.log(JSON.stringify({ ready: worker.workerId }));
} else {
  await main();
}

async function startWorker(transport: Transport, url: string, queue: string): Promise<ChildHandle> {
  const script = fileURLToPath(import.meta.url);
  const child = startProcess({
    args: ['--import', 'tsx', script, '--worker'],
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    env: { ...process.env, TRANSPORT: transport.name, BROKER_URL: url, QUEUE: queue },
  });
  await child.nextJson((line) => typeof (line as { ready?: unknown }).ready === 'string', 60_000);
  return child;
}

/**
 * A batch's identity: a queue's ids are global (`<worker>-<sequence>`, the same for both replicas' items of one
 * batch, counted once); local batchers number their batches each from 1.
 */
function batchKey(replica: number, batchId: unknown): string {
  return typeof batchId === 'string' ? batchId : `replica-${replica}:${String(batchId)}`;
}

/** What one load scenario measured. */
interface LoadResult {
  readonly sent: number;
  readonly ok: number;
  readonly failed: number;
  readonly throughput: number;
  readonly meanBatchSize: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/**
 * Sends RATE items/s for `seconds`, alternating between the two replicas' batchers (open loop: on schedule, whatever
 * the answers do), and waits for every answer. Batches are counted by their ids, as the X-Batch-Id header shows them.
 */
async function offer(
  batchers: readonly [Batcher<number, number>, Batcher<number, number>],
  seconds: number,
  during?: (elapsedMs: number) => void,
): Promise<LoadResult> {
  const batches = new Map<string, number>();
  const latencies: number[] = [];
  let ok = 0;
  let failed = 0;
  const total = RATE * seconds;
  const answers: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; i < total; i += 1) {
    const due = start + (i * 1_000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    during?.(performance.now() - start);
    const replica = i % 2;
    const sent = performance.now();
    answers.push(
      (batchers[replica] as Batcher<number, number>)(i, {
        onDispatch: (info) => batches.set(batchKey(replica, info.batchId), info.batchSize),
      }).then(
        (value) => {
          if (value === i + 1) ok += 1;
          else failed += 1;
          latencies.push(performance.now() - sent);
        },
        () => {
          failed += 1;
        },
      ),
    );
  }
  await Promise.all(answers);
  const elapsed = (performance.now() - start) / 1_000;
  const sizes = [...batches.values()];
  latencies.sort((a, b) => a - b);
  return {
    sent: total,
    ok,
    failed,
    throughput: ok / elapsed,
    meanBatchSize: sizes.reduce((sum, size) => sum + size, 0) / Math.max(1, sizes.length),
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
}

async function main(): Promise<void> {
  const only = process.argv.includes('--transport') ? process.argv[process.argv.indexOf('--transport') + 1] : undefined;
  const transports = TRANSPORTS.filter((transport) => only === undefined || transport.name === only);
  if (transports.length === 0) throw new TypeError(`Expected --transport redis or nats, got ${only}`);
  const report: Record<string, unknown> = {
    machine: { cpus: (await import('node:os')).cpus().length },
    model: { BASE_MS, PER_ITEM_MS, MAX_BATCH, RATE, LOAD_SECONDS },
  };
  // The baseline: each replica batching only its own traffic, at the same offered load.
  const localModels = [
    createBatcher(model, { maxBatchSize: MAX_BATCH, name: 'replica-0' }),
    createBatcher(model, { maxBatchSize: MAX_BATCH, name: 'replica-1' }),
  ] as const;
  const perReplica = await offer(localModels, LOAD_SECONDS);
  report.perReplica = perReplica;
  console.log(
    `offered ${RATE} items/s for ${LOAD_SECONDS} s over 2 replicas; model = ${BASE_MS} ms + ${PER_ITEM_MS} ms/item, max batch ${MAX_BATCH}`,
  );
  console.log(line('per-replica local batching (2 models)', perReplica));
  for (const transport of transports) report[transport.name] = await measure(transport, perReplica);
  console.log(
    '\nNotes: one 2-core machine runs the broker, both replicas, the workers and the load generator, so absolute\n' +
      "throughput says little; the batch-size ratio is what the shared queue buys: one worker sees both replicas' traffic.\n" +
      'With 2 workers each pulls when it frees up, so batches shrink back toward per-replica sizes while latency drops.',
  );
  await writeFile(
    fileURLToPath(new URL('./results/scaleout.json', import.meta.url)),
    `${JSON.stringify(report, null, 2)}\n`,
  );
}

function line(label: string, result: LoadResult): string {
  return (
    `${label.padEnd(38)} mean batch ${result.meanBatchSize.toFixed(2).padStart(6)}  throughput ${result.throughput.toFixed(0).padStart(4)}/s  ` +
    `p50 ${result.p50Ms.toFixed(1).padStart(6)} ms  p99 ${result.p99Ms.toFixed(1).padStart(6)} ms  ok ${result.ok}/${result.sent}`
  );
}

/** The three measurements over one transport, on a broker of its own. */
async function measure(transport: Transport, perReplica: LoadResult): Promise<Record<string, unknown>> {
  const broker = await transport.startBroker();
  const { url } = broker;
  const report: Record<string, unknown> = {};
  const name = transport.name === 'nats' ? 'NATS JetStream' : 'Redis';
  console.log(`\n== ${name} ==`);
  try {
    // 1. Added latency per item, no-op handler, concurrency 1.
    const latencyQueue = 'bench-latency';
    const worker = await startWorker(transport, url, latencyQueue);
    const replica = transport.replica(url, latencyQueue);
    await replica.ready;
    const remote = replica.batcher<number, number>('noop');
    const local = createBatcher(async (inputs: number[]) => inputs, { name: 'local-noop' });
    const roundP50 = async (batcher: Batcher<number, number>): Promise<number> => {
      const times: number[] = [];
      for (let i = 0; i < LATENCY_CALLS; i += 1) {
        const start = performance.now();
        await batcher(i);
        times.push(performance.now() - start);
      }
      return median(times);
    };
    await roundP50(remote); // warm-up: connections, JIT
    await roundP50(local);
    const queueP50: number[] = [];
    const localP50: number[] = [];
    for (let round = 0; round < LATENCY_ROUNDS; round += 1) {
      queueP50.push(await roundP50(remote));
      localP50.push(await roundP50(local));
    }
    const added = median(queueP50) - median(localP50);
    report.addedLatency = {
      queueP50Ms: round(median(queueP50), 3),
      localP50Ms: round(median(localP50), 3),
      addedP50Ms: round(added, 3),
    };
    console.log(
      `added latency per item (no-op handler, c=1, ${LATENCY_ROUNDS} interleaved rounds of ${LATENCY_CALLS}): ` +
        `queue p50 ${median(queueP50).toFixed(3)} ms, local p50 ${median(localP50).toFixed(3)} ms → added ${added.toFixed(3)} ms ` +
        `(${added <= 1 ? 'ok' : 'MISSED'} ≤ 1 ms)`,
    );
    await replica.close();
    await worker.stop();

    // 2. Mean batch size and throughput at the same offered load as the per-replica baseline.
    const shared: Record<number, LoadResult> = {};
    for (const workers of [1, 2]) {
      const queue = `bench-shared-${workers}`;
      const children = await Promise.all(Array.from({ length: workers }, () => startWorker(transport, url, queue)));
      const replicas = [transport.replica(url, queue), transport.replica(url, queue)];
      await Promise.all(replicas.map((r) => r.ready));
      shared[workers] = await offer(
        [replicas[0]!.batcher<number, number>('model'), replicas[1]!.batcher<number, number>('model')],
        LOAD_SECONDS,
      );
      await Promise.all(replicas.map((r) => r.close()));
      await Promise.all(children.map((child) => child.stop()));
    }
    console.log(line('shared queue, 1 worker', shared[1]!));
    console.log(line('shared queue, 2 workers', shared[2]!));
    const ratio1 = shared[1]!.meanBatchSize / perReplica.meanBatchSize;
    const ratio2 = shared[2]!.meanBatchSize / perReplica.meanBatchSize;
    console.log(
      `mean batch size, shared queue / per-replica: ${ratio1.toFixed(2)}x with 1 worker (${ratio1 >= 1.6 ? 'ok' : 'MISSED'} ≥ 1.6x), ${ratio2.toFixed(2)}x with 2 workers`,
    );
    report.load = {
      shared1: shared[1],
      shared2: shared[2],
      batchRatio1: round(ratio1, 2),
      batchRatio2: round(ratio2, 2),
    };

    // 3. A worker SIGKILLed under load.
    const killQueue = 'bench-kill';
    const [doomed, survivor] = await Promise.all([
      startWorker(transport, url, killQueue),
      startWorker(transport, url, killQueue),
    ]);
    const killReplicas = [transport.replica(url, killQueue), transport.replica(url, killQueue)];
    await Promise.all(killReplicas.map((r) => r.ready));
    let killed = false;
    const killResult = await offer(
      [killReplicas[0]!.batcher<number, number>('model'), killReplicas[1]!.batcher<number, number>('model')],
      LOAD_SECONDS,
      (elapsedMs) => {
        if (!killed && elapsedMs > (LOAD_SECONDS * 1_000) / 3) {
          killed = true;
          doomed.child.kill('SIGKILL');
        }
      },
    );
    const lost = killResult.sent - killResult.ok;
    console.log(
      `worker SIGKILLed at ${LOAD_SECONDS / 3} s of ${LOAD_SECONDS} s under ${RATE}/s: ${killResult.ok}/${killResult.sent} answered, ` +
        `${lost} lost (${lost === 0 ? 'ok' : 'MISSED'} 0), p99 ${killResult.p99Ms.toFixed(0)} ms (entries of the dead worker wait claimIdleMs = 1 s)`,
    );
    report.workerKill = { ...killResult, lost };
    await Promise.all(killReplicas.map((r) => r.close()));
    await survivor.stop();
  } finally {
    await broker.stop();
  }
  return report;
}
