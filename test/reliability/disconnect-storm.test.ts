// A disconnect storm against the fault server: clients that go away at random moments (before their request is
// read, while queued, while their batch runs, in the middle of an SSE stream), mixed with clients that wait for
// their answer. Afterwards nothing may be left behind: no queued or running item, no open request or connection,
// the same handles and listeners as before the storm, nothing on stderr; and every waiting client got its answer.
// Short (300 clients) under `pnpm test`, thousands under `pnpm test:reliability`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, pollUntil } from './helpers/child.js';
import { type FaultStats, faultStats, idle, startFaultServer } from './helpers/fault-server.js';
import { type Outcome, errorBody, postJson, retryAfterSeconds } from './helpers/http.js';
import { prng } from './helpers/load.js';
import { FULL, countBy, flush, record } from './helpers/report.js';

const CLIENTS = FULL ? 3_000 : 300;
const CONCURRENCY = FULL ? 300 : 100;
const SEED = 0x5eed;

type Route = '/generate' | '/generate-plain' | '/stream';
type Mode = 'complete' | 'early' | 'random' | 'mid-stream';
interface Client {
  readonly index: number;
  readonly route: Route;
  readonly mode: Mode;
  readonly abortAfterMs?: number;
  readonly maxTokens: number;
}

/**
 * The storm's clients, the same on every run but for when the random leavers leave: within `windowMs`, derived from
 * the machine's speed (a fixed window let every leaver leave while still queued on a loaded machine, so none left a
 * running batch).
 */
function clients(windowMs: number): Client[] {
  const random = prng(SEED);
  return Array.from({ length: CLIENTS }, (_, index) => {
    const r = random();
    const route: Route = r < 0.4 ? '/generate' : r < 0.8 ? '/stream' : '/generate-plain';
    const m = random();
    const maxTokens = 8 + Math.floor(random() * 40);
    if (m < 0.15) return { index, route, mode: 'complete', maxTokens };
    if (m < 0.25) return { index, route, mode: 'early', abortAfterMs: Math.floor(random() * 3), maxTokens };
    if (route === '/stream' && m < 0.55) return { index, route, mode: 'mid-stream', maxTokens };
    return { index, route, mode: 'random', abortAfterMs: 5 + Math.floor(random() * windowMs), maxTokens };
  });
}

let server: ServerProcess;

beforeAll(async () => {
  // A storm restarts the worker often (a batch whose every caller left is stopped); the execution timeout must not
  // fire on batches waiting for a reload.
  server = await startFaultServer({ executionTimeoutMs: 60_000, batchWaitMs: 10 });
});

afterAll(async () => {
  await flush('disconnect-storm');
  await server?.stop();
});

function run(client: Client): Promise<Outcome> {
  return postJson(
    server.url,
    client.route,
    { prompt: `Once upon a time, client ${client.index} `, max_tokens: client.maxTokens, temperature: 0 },
    {
      timeoutMs: 120_000,
      ...(client.abortAfterMs === undefined ? {} : { abortAfterMs: client.abortAfterMs }),
      ...(client.mode === 'mid-stream' ? { abortWhen: (chunk: string) => chunk.includes('data: {') } : {}),
    },
  );
}

/** Why a waiting client's answer is wrong, or `undefined`: 200 with a full result, or 503 QUEUE_FULL + Retry-After. */
function completeProblem(client: Client, outcome: Outcome): string | undefined {
  if (outcome.kind !== 'answered') return `no answer: ${outcome.kind === 'error' ? outcome.error : 'timeout'}`;
  const { status, body, headers } = outcome.answer;
  if (status === 503 && errorBody(body)?.code === 'QUEUE_FULL' && retryAfterSeconds(headers) !== undefined)
    return undefined;
  if (status !== 200) return `status ${status}: ${body.slice(0, 200)}`;
  if (client.route === '/stream')
    return body.endsWith('data: [DONE]\n\n') && !body.includes('event: error')
      ? undefined
      : `bad stream: ${body.slice(-200)}`;
  return typeof (JSON.parse(body) as { text?: unknown }).text === 'string'
    ? undefined
    : `bad body: ${body.slice(0, 200)}`;
}

/**
 * How long random leavers may wait before leaving: at least 400 ms, and 15 times a lone `/generate` request's
 * latency measured now (the median of three), so that some leave while their batch runs however fast the machine.
 */
async function leaveWindowMs(): Promise<number> {
  const latencies: number[] = [];
  for (let round = 0; round < 3; round += 1) {
    const started = performance.now();
    const outcome = await postJson(
      server.url,
      '/generate',
      { prompt: 'Once upon a time ', max_tokens: 24, temperature: 0 },
      { timeoutMs: 120_000 },
    );
    if (outcome.kind !== 'answered' || outcome.answer.status !== 200) throw new Error('the probe request failed');
    latencies.push(performance.now() - started);
  }
  const median = latencies.sort((a, b) => a - b)[1] as number;
  return Math.max(400, Math.round(15 * median));
}

const settled = (stats: FaultStats): boolean => {
  const batchersIdle = Object.values(stats.batchers).every(
    (batcher) => batcher.queueLength === 0 && batcher.inFlightBatches === 0,
  );
  const poolIdle =
    stats.pool.queueLength === 0 && stats.pool.busyWorkers === 0 && stats.pool.readyWorkers === stats.pool.size;
  // The stats request's own connection is the only one left.
  return batchersIdle && poolIdle && stats.requests.open === 0 && stats.connections === 1;
};

describe(`a disconnect storm of ${CLIENTS} clients (${CONCURRENCY} at a time)`, () => {
  it('leaves nothing behind, and every client that waited got exactly one answer', async () => {
    const windowMs = await leaveWindowMs();
    const baselineRead = await pollUntil(() => faultStats(server), settled, 30_000);
    const baseline = baselineRead.value;
    const rssBefore = server.rssBytes();
    const all = clients(windowMs);
    const outcomes: Outcome[] = new Array(all.length);
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < all.length) {
          const client = all[next++] as Client;
          outcomes[client.index] = await run(client);
        }
      }),
    );
    const stormMs = performance.now() - started;
    const afterRead = await pollUntil(
      () => statsOrExit(server),
      (stats) => stats === undefined || settled(stats),
      60_000,
      200,
    );
    if (afterRead.value === undefined) {
      const waitingClients = all.filter((client) => client.mode === 'complete');
      recordCrash('disconnect-storm', server, {
        waiting: waitingClients.length,
        answered: waitingClients.filter((client) => (outcomes[client.index] as Outcome).kind === 'answered').length,
        clients: CLIENTS,
        concurrency: CONCURRENCY,
        storm_ms: Math.round(stormMs),
        outcomes: countBy(outcomes, (outcome) =>
          outcome.kind === 'answered'
            ? String(outcome.answer.status)
            : outcome.kind === 'error'
              ? outcome.error
              : 'timeout',
        ),
      });
      expect.fail(
        `The server died during the storm (${JSON.stringify(server.exitInfo())}):\n${server.output().slice(-2_000)}`,
      );
    }
    const after = afterRead.value;
    const rssAfter = server.rssBytes();

    // Every route still serves.
    const checks = await Promise.all(
      (['/generate', '/generate-plain', '/stream'] as const).map((route) =>
        postJson(server.url, route, { prompt: 'Once upon a time ', max_tokens: 4 }, { timeoutMs: 60_000 }),
      ),
    );

    const waiting = all.filter((client) => client.mode === 'complete');
    const problems = waiting
      .map((client) => completeProblem(client, outcomes[client.index] as Outcome))
      .filter((problem) => problem !== undefined);
    const leaving = all.filter((client) => client.mode !== 'complete');
    const fate = (outcome: Outcome): string =>
      outcome.kind === 'answered'
        ? `answered before leaving (${outcome.answer.status})`
        : outcome.kind === 'timeout'
          ? 'timeout'
          : outcome.error.startsWith('aborted by the client')
            ? outcome.error
            : `failed: ${outcome.error}`;
    const leavers = countBy(
      leaving,
      (client) => `${client.mode} ${client.route}: ${fate(outcomes[client.index] as Outcome)}`,
    );
    const failedLeavers = leaving.filter(
      (client) =>
        fate(outcomes[client.index] as Outcome).startsWith('failed') ||
        fate(outcomes[client.index] as Outcome) === 'timeout',
    );
    const midStream = leaving.filter(
      (client) =>
        (outcomes[client.index] as Outcome).kind === 'error' &&
        (outcomes[client.index] as { error?: string }).error === 'aborted by the client mid-body',
    );

    // Items that never reached the handler were cancelled while queued (or refused as QUEUE_FULL).
    const cancels = Object.fromEntries(
      (['generate', 'generate-plain', 'stream'] as const).map((name) => {
        const b = after.batchers[name];
        const a = baseline.batchers[name];
        const enqueued = (after.enqueued[name] ?? 0) - (baseline.enqueued[name] ?? 0);
        const processed = b.itemsProcessed - a.itemsProcessed;
        const queueFull = (b.rejected.QUEUE_FULL ?? 0) - (a.rejected.QUEUE_FULL ?? 0);
        const cancelled = b.cancelled - a.cancelled;
        const whileQueued = enqueued - processed - queueFull;
        return [
          name,
          { enqueued, processed, queueFull, cancelled, whileQueued, whileRunning: cancelled - whileQueued },
        ];
      }),
    );
    const answered = waiting.filter((client) => (outcomes[client.index] as Outcome).kind === 'answered').length;
    record({
      scenario: 'disconnect-storm',
      server: 'fault-server',
      requests_sent: waiting.length,
      answered_exactly_once: answered,
      lost: waiting.length - answered,
      crashes: server.exitInfo() === undefined ? 0 : 1,
      detail: {
        clients: CLIENTS,
        concurrency: CONCURRENCY,
        storm_ms: Math.round(stormMs),
        waiting_clients: waiting.length,
        waiting_answers: countBy(waiting, (client) => {
          const outcome = outcomes[client.index] as Outcome;
          return outcome.kind === 'answered' ? String(outcome.answer.status) : outcome.kind;
        }),
        leaving_clients: leaving.length,
        leaving_fates: leavers,
        aborted_mid_stream: midStream.length,
        cancels,
        worker_restarts: after.pool.restarts - baseline.pool.restarts,
        worker_crashes: after.pool.crashes - baseline.pool.crashes,
        settled: afterRead.ok,
        before: {
          resources: baseline.resources,
          listeners: baseline.listeners,
          connections: baseline.connections,
          rss_mib: mib(rssBefore),
        },
        after: {
          resources: after.resources,
          listeners: after.listeners,
          connections: after.connections,
          rss_mib: mib(rssAfter),
          requests: after.requests,
        },
        problems: problems.slice(0, 10),
      },
    });

    expect(server.exitInfo()).toBeUndefined();
    expect(problems).toEqual([]);
    expect(failedLeavers.map((client) => fate(outcomes[client.index] as Outcome))).toEqual([]);
    // The storm did reach every state: cancelled while queued, while running, and in the middle of a stream.
    expect(cancels.generate?.whileQueued).toBeGreaterThan(0);
    expect(cancels.generate?.whileRunning).toBeGreaterThan(0);
    expect(cancels.stream?.whileRunning).toBeGreaterThan(0);
    expect(midStream.length).toBeGreaterThan(0);
    // ...and left nothing behind.
    // The stats are part of the compared value, so a failure shows them.
    expect({ settled: afterRead.ok, after }).toEqual({ settled: true, after });
    expect(after.requests.open).toBe(0);
    expect(after.requests.finished + after.requests.closedEarly).toBe(after.requests.requests);
    expect(after.resources).toEqual(baseline.resources);
    expect(after.listeners).toEqual({ ...baseline.listeners, openResponses: 0 });
    expect(after.pool).toMatchObject({
      queueLength: 0,
      busyWorkers: 0,
      readyWorkers: 1,
      crashes: baseline.pool.crashes,
    });
    expect(checks.map((outcome) => (outcome.kind === 'answered' ? outcome.answer.status : outcome.kind))).toEqual([
      200, 200, 200,
    ]);
    expect(server.stderr()).toBe('');
  });
});

/**
 * Clients in a row that each leave while their batch (of one: theirs) runs. Each one costs a worker restart under
 * request scheduling (a model load): `pnpm test` bounds the work to a few, `pnpm test:reliability` does 20.
 */
const ABANDONED = FULL ? 20 : 6;

describe.each([
  // One generate() call per batch: the only way to stop it is to stop its worker, in the middle of inference.
  { scheduling: 'request', restarts: ABANDONED, how: 'its worker is stopped in the middle of inference and replaced' },
  // The decode loop drops a cancelled sequence at its next step: the worker keeps running.
  {
    scheduling: 'continuous',
    restarts: 0,
    how: 'the decode loop drops it at its next step and the worker keeps running',
  },
] as const)('clients that all leave a running batch, $scheduling scheduling: $how', ({ scheduling, restarts }) => {
  let lone: ServerProcess;

  beforeAll(async () => {
    lone = await startFaultServer({ executionTimeoutMs: 60_000, batchWaitMs: 0, scheduling });
  });

  afterAll(async () => {
    await lone?.stop();
  });

  it(`survives ${ABANDONED} in a row, with ${restarts} worker restarts, and the next request gets 200`, async () => {
    const before = await faultStats(lone);
    const fates: string[] = [];
    for (let index = 0; index < ABANDONED && lone.exitInfo() === undefined; index += 1) {
      const ready = await pollUntil(
        () => statsOrExit(lone),
        (stats) => stats === undefined || idle(stats),
        30_000,
        20,
      );
      if (ready.value === undefined) break;
      const controller = new AbortController();
      const request = postJson(
        lone.url,
        '/generate-plain',
        { prompt: `Once upon a time, ${index} `, max_tokens: 256 },
        { signal: controller.signal, timeoutMs: 60_000 },
      );
      // Leave once the batch runs (the model is generating its 256 tokens).
      const running = await pollUntil(
        () => statsOrExit(lone),
        (stats) => stats === undefined || stats.batchers['generate-plain'].inFlightBatches === 1,
        10_000,
        5,
      );
      controller.abort();
      const outcome = await request;
      fates.push(
        running.value === undefined
          ? 'server gone'
          : outcome.kind === 'answered'
            ? `answered ${outcome.answer.status} before leaving`
            : outcome.kind === 'error'
              ? outcome.error
              : 'timeout',
      );
    }
    const afterRead = await pollUntil(
      () => statsOrExit(lone),
      (stats) => stats === undefined || idle(stats),
      30_000,
      50,
    );
    if (afterRead.value === undefined) {
      recordCrash(`abandoned-running-batches-${scheduling}`, lone, {
        waiting: 0,
        answered: 0,
        abandoned: fates.length,
        fates,
      });
      expect.fail(
        `The server died when a running batch was abandoned (${JSON.stringify(lone.exitInfo())}):\n${lone.output().slice(-1_000)}`,
      );
    }
    const after = afterRead.value;
    const next = await postJson(
      lone.url,
      '/generate-plain',
      { prompt: 'Once upon a time ', max_tokens: 4 },
      { timeoutMs: 60_000 },
    );
    const answered = next.kind === 'answered' ? 1 : 0;
    record({
      scenario: scheduling === 'request' ? 'abandoned-running-batches' : `abandoned-running-batches-${scheduling}`,
      server: 'fault-server',
      requests_sent: 1,
      answered_exactly_once: answered,
      lost: 1 - answered,
      crashes: lone.exitInfo() === undefined ? 0 : 1,
      detail: {
        scheduling,
        abandoned: fates.length,
        fates,
        worker_restarts: after.pool.restarts - before.pool.restarts,
        stderr: lone.stderr(),
      },
    });
    expect(fates).toEqual(Array(ABANDONED).fill('aborted by the client'));
    expect(after.pool.restarts - before.pool.restarts).toBe(restarts);
    expect(after.pool.crashes - before.pool.crashes).toBe(0);
    expect(after.batchers['generate-plain'].cancelled - before.batchers['generate-plain'].cancelled).toBe(ABANDONED);
    expect(next.kind === 'answered' && next.answer.status).toBe(200);
    expect(lone.stderr()).toBe('');
  });
});

/** The server's stats, or `undefined` once it has exited (so a crash is reported as one, not as a refused request). */
async function statsOrExit(target: ServerProcess): Promise<FaultStats | undefined> {
  if (target.exitInfo() !== undefined) return undefined;
  try {
    return await faultStats(target);
  } catch (error) {
    // Refused because it just died: let the exit event land, then say so.
    await new Promise((resolve) => setTimeout(resolve, 200));
    if (target.exitInfo() !== undefined) return undefined;
    throw error;
  }
}

/** Records a scenario whose server died: `waiting` clients had to be answered, `answered` were. */
function recordCrash(
  name: string,
  target: ServerProcess,
  detail: { waiting: number; answered: number } & Record<string, unknown>,
): void {
  const { waiting, answered, ...rest } = detail;
  record({
    scenario: name,
    server: 'fault-server',
    requests_sent: waiting,
    answered_exactly_once: answered,
    lost: waiting - answered,
    crashes: 1,
    detail: { ...rest, exit: target.exitInfo(), output_tail: target.output().slice(-1_000) },
  });
}

function mib(bytes: number | undefined): number | null {
  return bytes === undefined ? null : Math.round(bytes / 2 ** 20);
}
