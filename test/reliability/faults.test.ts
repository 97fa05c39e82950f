// Poison inputs, crashing and hanging workers, against the purpose-built fault server (real model, real worker
// threads that misbehave on marked prompts). Exact statuses and counts, and no duration: the hang's 504 comes when
// the test jumps the server's batcher clock to executionTimeoutMs (see ../fault-server.ts), not a moment earlier.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, pollUntil } from './helpers/child.js';
import { type FaultStats, MARKERS, advanceClock, faultStats, idle, startFaultServer } from './helpers/fault-server.js';
import { type Outcome, errorBody, leaksInternals, postJson, retryAfterSeconds } from './helpers/http.js';
import { type ScenarioResult, countBy, flush, record } from './helpers/report.js';

/** Long enough for 8 concurrent requests to meet in one batch on a loaded machine; batches dispatch when full. */
const BATCH_WAIT_MS = 250;
/**
 * The handler-call limit, on the server's batcher clock: an hour, which real time never reaches in this file, so
 * only the hang test's clock jump ends a batch by it. A batch dispatched while the pool replaces its worker (after a
 * crash, or after the hang) counts the replacement's model load against the limit: on real time, with any limit
 * measured beforehand, that load could outlast it on a slow, loaded machine and a request that never reached the
 * model got 504.
 */
const EXECUTION_TIMEOUT_MS = 3_600_000;

let server: ServerProcess;

beforeAll(async () => {
  server = await startFaultServer({
    executionTimeoutMs: EXECUTION_TIMEOUT_MS,
    batchWaitMs: BATCH_WAIT_MS,
    maxBatchSize: 8,
  });
});

afterAll(async () => {
  await flush('faults');
  await server?.stop();
});

const good = (index: number): string => `Once upon a time, a fox number ${index} `;

function generate(route: '/generate' | '/generate-plain', prompts: readonly string[]): Promise<Outcome[]> {
  return Promise.all(
    prompts.map((prompt) =>
      postJson(server.url, route, { prompt, max_tokens: 4, temperature: 0 }, { timeoutMs: 60_000 }),
    ),
  );
}

/** Status, error code, batch id and size of each answer (`lost` for none). */
function summary(outcomes: readonly Outcome[]) {
  return outcomes.map((outcome) => {
    if (outcome.kind !== 'answered')
      return { status: 'lost' as const, detail: outcome.kind === 'error' ? outcome.error : 'timeout' };
    const { status, headers, body } = outcome.answer;
    const error = errorBody(body);
    return {
      status,
      code: error?.code,
      message: error?.message,
      retryAfter: retryAfterSeconds(headers),
      batchId: headers['x-batch-id'],
      batchSize: headers['x-batch-size'],
      leaks: leaksInternals(body),
      text: error === undefined ? (JSON.parse(body) as { text?: unknown }).text : undefined,
    };
  });
}

/** Handler calls made since `before`, sizes sorted largest first. */
function newCalls(before: FaultStats, after: FaultStats, route: 'generate' | 'generate-plain'): number[] {
  return after.calls[route].slice(before.calls[route].length).sort((a, b) => b - a);
}

function scenario(name: string, outcomes: readonly Outcome[], detail: Record<string, unknown>): ScenarioResult {
  const answered = outcomes.filter((outcome) => outcome.kind === 'answered').length;
  const result: ScenarioResult = {
    scenario: name,
    server: 'fault-server',
    requests_sent: outcomes.length,
    answered_exactly_once: answered,
    lost: outcomes.length - answered,
    crashes: server.exitInfo() === undefined ? 0 : 1,
    detail: { ...detail, statuses: countBy(summary(outcomes), (item) => String(item.status)) },
  };
  record(result);
  return result;
}

async function settle(): Promise<FaultStats> {
  const { value, ok } = await pollUntil(() => faultStats(server), idle, 30_000);
  expect(ok, `the fault server did not settle: ${JSON.stringify(value)}`).toBe(true);
  return value;
}

describe('the fault server (real model, misbehaving worker, isolate + executionTimeoutMs)', () => {
  it('poison (the handler throws), onBatchError isolate: only the poison request fails, the 7 others of its batch succeed', async () => {
    const before = await settle();
    const prompts = [good(0), good(1), good(2), `${MARKERS.poison} ${good(3)}`, good(4), good(5), good(6), good(7)];
    const outcomes = await generate('/generate', prompts);
    const after = await settle();
    const answers = summary(outcomes);
    scenario('poison-isolate', outcomes, { handler_calls: newCalls(before, after, 'generate'), answers });

    const poison = answers[3];
    expect(poison).toMatchObject({
      status: 500,
      code: 'HANDLER_ERROR',
      message: 'Internal Server Error',
      leaks: false,
    });
    const others = answers.filter((_, index) => index !== 3);
    expect(others.map((answer) => answer.status)).toEqual(Array(7).fill(200));
    for (const answer of others) expect(answer.text).toEqual(expect.any(String));
    // One batch of all 8, re-run by halves down to the poison alone: 8, then 4 + 4, 2 + 2, 1 + 1.
    expect(new Set(answers.map((answer) => answer.batchId)).size).toBe(1);
    expect(answers.map((answer) => answer.batchSize)).toEqual(Array(8).fill('8'));
    expect(newCalls(before, after, 'generate')).toEqual([8, 4, 4, 2, 2, 1, 1]);
  });

  it('the same poison without isolate (fail-batch): its whole batch fails, so isolate is what saved the others', async () => {
    const before = await settle();
    const outcomes = await generate('/generate-plain', [good(0), `${MARKERS.poison} here`, good(2), good(3)]);
    const after = await settle();
    const answers = summary(outcomes);
    scenario('poison-fail-batch', outcomes, { handler_calls: newCalls(before, after, 'generate-plain'), answers });

    expect(answers.map((answer) => [answer.status, answer.code])).toEqual(Array(4).fill([500, 'HANDLER_ERROR']));
    expect(newCalls(before, after, 'generate-plain')).toEqual([4]);
  });

  it('poison that crashes the worker, isolate: only it fails (503 UNAVAILABLE), the others succeed on replaced workers', async () => {
    const before = await settle();
    const prompts = [good(0), good(1), good(2), good(3), good(4), `${MARKERS.exit} ${good(5)}`, good(6), good(7)];
    const outcomes = await generate('/generate', prompts);
    const after = await settle();
    const answers = summary(outcomes);
    const workerCrashes = after.pool.crashes - before.pool.crashes;
    scenario('poison-worker-crash-isolate', outcomes, {
      handler_calls: newCalls(before, after, 'generate'),
      worker_crashes: workerCrashes,
      worker_restarts: after.pool.restarts - before.pool.restarts,
      answers,
    });

    expect(answers[5]).toMatchObject({ status: 503, code: 'UNAVAILABLE', leaks: false });
    expect(answers[5]?.retryAfter).toBeGreaterThanOrEqual(1);
    expect(answers.filter((_, index) => index !== 5).map((answer) => answer.status)).toEqual(Array(7).fill(200));
    // Every batch holding the poison crashed its worker: 8, 4, 2 and 1.
    expect(newCalls(before, after, 'generate')).toEqual([8, 4, 4, 2, 2, 1, 1]);
    expect([workerCrashes, after.pool.restarts - before.pool.restarts]).toEqual([4, 4]);
    expect(after.pool).toMatchObject({ readyWorkers: 1, isReady: true });
  });

  it.each([
    // The worker's own words (exit code, error text) go to logs only: clients read the generic status message.
    ['worker-crash', MARKERS.exit, /^The model is not available right now; retry later$/],
    ['worker-uncaught-exception', MARKERS.throw, /^The model is not available right now; retry later$/],
  ])(
    '%s: the in-flight batch gets 503 UNAVAILABLE + Retry-After, the worker is replaced, the next requests get 200',
    async (name, marker, message) => {
      const before = await settle();
      const outcomes = await generate('/generate-plain', [good(0), good(1), `${marker} ${good(2)}`, good(3)]);
      const next = await generate('/generate-plain', [good(4), good(5), good(6), good(7)]);
      const after = await settle();
      const answers = summary(outcomes);
      const nextAnswers = summary(next);
      scenario(name, [...outcomes, ...next], {
        worker_crashes: after.pool.crashes - before.pool.crashes,
        worker_restarts: after.pool.restarts - before.pool.restarts,
        in_flight: answers,
        next: nextAnswers,
      });

      for (const answer of answers) {
        expect(answer).toMatchObject({ status: 503, code: 'UNAVAILABLE', leaks: false });
        expect(answer.message).toMatch(message);
        expect(answer.retryAfter).toBeGreaterThanOrEqual(1);
      }
      expect(nextAnswers.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
      expect([after.pool.crashes - before.pool.crashes, after.pool.restarts - before.pool.restarts]).toEqual([1, 1]);
    },
  );

  it('a model that hangs: 504 EXECUTION_TIMEOUT once executionTimeoutMs passed, not at half of it, the stuck worker is replaced, the queued and next requests get 200', async () => {
    const before = await settle();
    const plain = (stats: FaultStats) => stats.batchers['generate-plain'];
    const hang = postJson(
      server.url,
      '/generate-plain',
      { prompt: `${MARKERS.hang} ${good(0)}`, max_tokens: 4 },
      { timeoutMs: 60_000 },
    );
    let hangAnswered = false;
    void hang.then(() => (hangAnswered = true));
    // Once the hanging batch runs on the worker, a second request queues behind it (the only slot is taken).
    const running = await pollUntil(
      () => faultStats(server),
      (stats) => plain(stats).inFlightBatches === 1 && stats.pool.busyWorkers === 1,
      30_000,
      20,
    );
    expect(running.ok, `the hanging batch did not start: ${JSON.stringify(running.value)}`).toBe(true);
    const queued = postJson(server.url, '/generate-plain', { prompt: good(1), max_tokens: 4 }, { timeoutMs: 60_000 });
    const waiting = await pollUntil(
      () => faultStats(server),
      (stats) => plain(stats).queueLength === 1,
      30_000,
      20,
    );
    expect(waiting.ok, `the second request did not queue: ${JSON.stringify(waiting.value)}`).toBe(true);

    // Half the limit on (the clock also ran on real time since the dispatch, far less than half an hour): nothing
    // ends, the hang still holds the only slot and the other request waits.
    const firedShort = await advanceClock(server, EXECUTION_TIMEOUT_MS / 2);
    const short = await faultStats(server);
    // No timer was due: with the only slot taken no batch window is open, and no request has a deadline.
    expect(firedShort).toBe(0);
    expect({ ...plain(short), answered: hangAnswered }).toMatchObject({
      inFlightBatches: 1,
      queueLength: 1,
      failed: plain(before).failed,
      answered: false,
    });
    // The other half, past the limit: the hang's batch fails now, its slot goes to the queued request, which reaches
    // the model once the stuck worker is replaced (its own limit, an hour on, is never reached: no wall-clock race).
    const firedAtLimit = await advanceClock(server, EXECUTION_TIMEOUT_MS / 2);
    // Exactly the hang's execution limit (the queued batch's own limit is armed during the jump, an hour on).
    expect(firedAtLimit).toBe(1);
    const [hung, waited] = await Promise.all([hang, queued]);
    const next = await generate('/generate-plain', [good(2)]);
    const after = await settle();
    const [hungAnswer, waitedAnswer, nextAnswer] = summary([hung, waited, ...next]);
    scenario('hang', [hung, waited, ...next], {
      execution_timeout_ms: EXECUTION_TIMEOUT_MS,
      clock_jumps_ms: [EXECUTION_TIMEOUT_MS / 2, EXECUTION_TIMEOUT_MS / 2],
      timers_fired: [firedShort, firedAtLimit],
      hang_answered_after_ms: Math.round(hung.ms),
      queued_answered_after_ms: Math.round(waited.ms),
      worker_restarts: after.pool.restarts - before.pool.restarts,
      worker_crashes: after.pool.crashes - before.pool.crashes,
      answers: [hungAnswer, waitedAnswer, nextAnswer],
    });

    expect(hungAnswer).toMatchObject({
      status: 504,
      code: 'EXECUTION_TIMEOUT',
      message: `Batch ${String(hungAnswer?.batchId)} ran longer than executionTimeoutMs (${EXECUTION_TIMEOUT_MS} ms)`,
      leaks: false,
    });
    expect(waitedAnswer).toMatchObject({ status: 200, text: expect.any(String) });
    expect(waitedAnswer?.batchId).not.toBe(hungAnswer?.batchId);
    expect(nextAnswer).toMatchObject({ status: 200 });
    // One item failed (the hang), by its limit; the queued and next ones succeeded.
    expect([
      plain(after).failed - plain(before).failed,
      plain(after).succeeded - plain(before).succeeded,
      plain(after).expired - plain(before).expired,
    ]).toEqual([1, 2, 0]);
    // Terminated on purpose (not a crash) and replaced by a fresh worker.
    expect([after.pool.restarts - before.pool.restarts, after.pool.crashes - before.pool.crashes]).toEqual([1, 0]);
    expect(after.pool).toMatchObject({ readyWorkers: 1, busyWorkers: 0 });
  });

  it('is still up afterwards: healthy, ready, nothing on stderr, no request left open', async () => {
    const stats = await settle();
    expect(server.exitInfo()).toBeUndefined();
    const ready = await postJson(server.url, '/generate', { prompt: good(9), max_tokens: 2 });
    expect(ready.kind === 'answered' && ready.answer.status).toBe(200);
    expect(stats.requests.open).toBe(0);
    expect(server.stderr()).toBe('');
  });
});
