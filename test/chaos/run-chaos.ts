// `pnpm test:chaos` (not part of `pnpm test`): per broker (CHAOS_BROKERS, default redis then nats), a broker of its
// own, two web replicas and two model workers as real CLI processes, steady mixed load, and a seeded fault loop for
// CHAOS_MINUTES (default 5); then the checks, the tables and bench/results/chaos-<broker>.json. Exits 1 on any
// violation. See test/chaos/README.md.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollUntil } from '@microbatch/test-kit';
import { type ChaosConfig, readChaosConfig } from './chaos-config.js';
import { judge } from './checks/verdict.js';
import { runFaults } from './faults/fault-loop.js';
import { seeded } from './faults/random.js';
import { type BrokerKind, type Leftovers, startBroker } from './fleet/broker.js';
import { Fleet, type UnexpectedExit } from './fleet/fleet.js';
import { computeBaseline } from './load/baseline.js';
import { runLoad } from './load/load-generator.js';
import { printReport, writeSummary } from './report/report.js';

const QUEUE = 'tinystories-656k';
const FRAMEWORKS = ['express', 'fastify'] as const;
const WORKERS = 2;
/** The fault loop's pause before each fault, drawn uniformly. */
const INTERVAL_MS = { min: 10_000, max: 20_000 } as const;

const log = (line: string): void => console.log(`[chaos ${new Date().toISOString()}] ${line}`);

async function runOn(kind: BrokerKind, config: ChaosConfig): Promise<boolean> {
  log(`${kind}: seed ${config.seed}, ${config.minutes} min of faults, ${config.concurrency} requests in flight`);
  const broker = await startBroker(kind, { queue: QUEUE, redisAppendOnly: config.redisAppendOnly });
  const unexpectedExits: UnexpectedExit[] = [];
  const fleet = new Fleet({
    queueUrl: broker.url,
    queue: QUEUE,
    frameworks: FRAMEWORKS,
    workers: WORKERS,
    claimIdleMs: config.claimIdleMs,
    log,
    onUnexpectedExit: (exit) => {
      unexpectedExits.push(exit);
      log(`UNEXPECTED EXIT ${exit.id} (code ${exit.code}, signal ${exit.signal}); restarting it`);
    },
  });
  try {
    await fleet.start();
    const ready = await pollUntil(
      () => Promise.all(fleet.liveReplicas().map((one) => fetch(`${one.url as string}/readyz`).then((r) => r.status))),
      (statuses) => statuses.every((status) => status === 200),
      60_000,
    );
    if (!ready.ok) throw new Error(`The replicas never became ready: /readyz ${ready.value.join(', ')}`);
    const giveUpMs = config.deadlineMs + config.slackMs;
    const cases = await computeBaseline({
      urls: fleet.liveReplicas().map((one) => one.url as string),
      maxTokens: config.maxTokens,
      giveUpMs,
      log,
    });
    log(`baseline: ${cases.length} prompts, each with one greedy text`);

    const startedAt = Date.now();
    const until = startedAt + config.minutes * 60_000;
    const stopLoad = new AbortController();
    const load = runLoad({
      cases,
      concurrency: config.concurrency,
      maxTokens: config.maxTokens,
      giveUpMs,
      replicas: () => fleet.liveReplicas(),
      signal: stopLoad.signal,
    });
    const faults = await runFaults({
      fleet,
      broker,
      random: seeded(config.seed),
      minIntervalMs: INTERVAL_MS.min,
      maxIntervalMs: INTERVAL_MS.max,
      claimIdleMs: config.claimIdleMs,
      until,
      log,
    });
    // The load runs to the end of the period, past the last fault's recovery, so "after" counts are not empty.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now())));
    stopLoad.abort();
    const loadEndedAt = Date.now();
    const records = await load;
    log(`load: ${records.length} requests; draining`);
    const leftovers = await drained(() => broker.leftovers(), config);
    await fleet.stop();
    const run = { cases, records, faults, incarnations: fleet.incarnations, unexpectedExits, leftovers, loadEndedAt };
    const verdict = judge(run);
    const facts = {
      broker: kind,
      persistence: broker.persistence,
      seed: config.seed,
      minutes: config.minutes,
      concurrency: config.concurrency,
      maxTokens: config.maxTokens,
      deadlineMs: config.deadlineMs,
      slackMs: config.slackMs,
      claimIdleMs: config.claimIdleMs,
      prompts: cases.length,
      startedAt,
      faults,
      unexpectedExits,
      leftovers,
    };
    printReport(facts, verdict, console.log);
    log(`summary: ${writeSummary(facts, verdict)}`);
    return verdict.passed;
  } finally {
    await fleet.stop();
    await broker.stop();
    // Also when the run could not complete: what each process printed is where to look.
    const logs = join(tmpdir(), `microbatch-chaos-${kind}-${Date.now()}`);
    fleet.writeLogs(logs);
    log(`process logs: ${logs}`);
  }
}

/**
 * Polls the broker until it holds no request entry, for as long as entries may rightly stay: past their deadline,
 * then a sweep; a claim-idle period for entries of a killed worker.
 */
async function drained(read: () => Promise<Leftovers>, config: ChaosConfig): Promise<Leftovers> {
  const limitMs = config.deadlineMs + 4 * config.claimIdleMs + 10_000;
  const { value } = await pollUntil(
    () => read().catch((error: unknown) => ({ entries: -1, pending: -1, detail: `unreadable: ${String(error)}` })),
    (leftovers) => leftovers.entries === 0 && leftovers.pending === 0,
    limitMs,
    500,
  );
  return value;
}

const config = readChaosConfig(process.env);
let passed = true;
let incomplete = false;
for (const kind of config.brokers) {
  try {
    passed = (await runOn(kind, config)) && passed;
  } catch (error) {
    // The harness could not run on this broker (a process that never started, no baseline): a failure, not a pass.
    log(
      `${kind}: the run could not complete: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    passed = false;
    incomplete = true;
  }
}
const failure = incomplete
  ? 'FAIL: a run could not complete (see above)'
  : 'FAIL: violations found (see the tables above)';
log(passed ? 'PASS on every broker' : failure);
process.exit(passed ? 0 : 1);
