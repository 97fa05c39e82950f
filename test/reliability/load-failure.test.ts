// A model that cannot load. The REAL example (its documented start command) must print one clear line naming the
// model folder and exit 1, without hanging. The fault server, which stays up, must report not-ready and answer
// 503 UNAVAILABLE at once. A model file that blocks on open (a FIFO: what a dead network mount looks like) must be
// caught by the pool's startTimeoutMs the same way.
import { execFileSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, type ServerProcess, exampleStartArgs, pollUntil, runToExit, startServer } from './helpers/child.js';
import { faultStats, startFaultServer } from './helpers/fault-server.js';
import { type Outcome, answer, errorBody, leaksInternals, postJson, retryAfterSeconds } from './helpers/http.js';
import { type ScenarioResult, flush, record } from './helpers/report.js';

const BUNDLED = join(REPO_ROOT, 'models', 'tinystories-656k');
/**
 * The longest a failed start may take before it counts as a hang: six times what this machine, now, takes to start
 * the example to `ready` with the real model (process, compile, model load: the most a failed start does), as the
 * three runs go side by side on shared cores; at least 60 s. A fixed 60 s was exceeded on a loaded machine (48 s for
 * the folder that does not exist, which loads nothing). Set in `beforeAll`.
 */
let EXIT_WITHIN_MS = 60_000;
/** The hang guard of the example runs: EXIT_WITHIN_MS is capped below it. */
const EXAMPLE_TEST_TIMEOUT_MS = 180_000;

let root: string;
const dirs: Record<'missing' | 'garbage' | 'corruptOnnx' | 'fifo', string> = {
  missing: '',
  garbage: '',
  corruptOnnx: '',
  fifo: '',
};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'microbatch-load-failure-'));
  dirs.missing = join(root, 'does-not-exist');
  // Every file present, none of them valid.
  dirs.garbage = join(root, 'garbage');
  await mkdir(join(dirs.garbage, 'onnx'), { recursive: true });
  await writeFile(join(dirs.garbage, 'config.json'), 'not json');
  await writeFile(join(dirs.garbage, 'tokenizer.json'), 'not a tokenizer');
  await writeFile(join(dirs.garbage, 'onnx', 'model.onnx'), Buffer.alloc(4096, 7));
  // A valid tokenizer and config (the validator loads), a corrupt network (the worker fails).
  dirs.corruptOnnx = join(root, 'corrupt-onnx');
  dirs.fifo = join(root, 'fifo');
  for (const dir of [dirs.corruptOnnx, dirs.fifo]) {
    await mkdir(join(dir, 'onnx'), { recursive: true });
    for (const file of await readdir(BUNDLED))
      if (file.endsWith('.json')) await copyFile(join(BUNDLED, file), join(dir, file));
  }
  await writeFile(join(dirs.corruptOnnx, 'onnx', 'model.onnx'), Buffer.alloc(4096, 7));
  // Opening a FIFO for reading blocks until a writer comes: the worker hangs while loading.
  execFileSync('mkfifo', [join(dirs.fifo, 'onnx', 'model.onnx')]);

  const started = performance.now();
  const healthy = await startServer({ args: exampleStartArgs() });
  const startupMs = performance.now() - started;
  await healthy.stop();
  EXIT_WITHIN_MS = Math.min(EXAMPLE_TEST_TIMEOUT_MS - 30_000, Math.max(60_000, Math.ceil(6 * startupMs)));
});

afterAll(async () => {
  await flush('load-failure');
  await rm(root, { recursive: true, force: true });
});

describe('a model that fails to load', () => {
  const exampleRuns: Record<string, unknown>[] = [];

  // Three independent processes: run side by side.
  // A folder that is not there is refused before listening (nothing to wait for); the others listen first (so
  // readiness could say "not ready" while the model loaded), then fail.
  it.concurrent.for([
    ['a model folder that does not exist', 'missing', /^Cannot start: Model folder not found: (.+)$/m, false],
    [
      'a folder of garbage files',
      'garbage',
      /^Failed to load the (?:tokenizer|text-generation model) from "(.+)": /m,
      true,
    ],
    [
      'a valid tokenizer with a corrupt ONNX file',
      'corruptOnnx',
      /^Failed to load the text-generation model from "(.+)": .*(?:Protobuf parsing failed|unsupported protobuf wire type)/m,
      true,
    ],
  ] as const)(
    'the Express example, %s: prints one clear line naming the folder and exits 1, no hang',
    { timeout: EXAMPLE_TEST_TIMEOUT_MS },
    async ([what, dir, message, listensFirst], { expect }) => {
      const run = await runToExit(exampleStartArgs(), { MODEL_DIR: dirs[dir] }, EXIT_WITHIN_MS);
      exampleRuns.push({
        model: what,
        exit: run.exit,
        killed_after_ms: run.killed ? EXIT_WITHIN_MS : null,
        ms: Math.round(run.ms),
        stderr: run.stderr,
      });
      expect(run.killed, `no exit within ${EXIT_WITHIN_MS} ms:\n${run.output}`).toBe(false);
      expect(run.exit).toEqual({ code: 1, signal: null });
      expect(/^listening on http:\/\/127\.0\.0\.1:\d+$/m.test(run.output)).toBe(listensFirst);
      expect(run.stderr).toMatch(message);
      expect(message.exec(run.stderr)?.[1]).toBe(dirs[dir]);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(leaksInternals(run.stderr)).toBe(false);
    },
  );

  it('records the example runs', () => {
    record({
      scenario: 'load-failure-example',
      server: 'express-text-completion',
      requests_sent: 0,
      answered_exactly_once: 0,
      lost: 0,
      crashes: 0,
      detail: { runs: exampleRuns },
    });
    expect(exampleRuns).toHaveLength(3);
  });

  describe('the fault server, which stays up when its model cannot load', () => {
    const scenarios: Record<string, unknown>[] = [];
    const outcomes: Outcome[] = [];
    let crashes = 0;
    /** The FIFO case's server, left running for the exit test. */
    let fifoServer: ServerProcess | undefined;

    /**
     * How long the corrupt ONNX case took from start to its load failure: the time a worker needs on this machine to
     * reach the model file. The FIFO case's startTimeoutMs is a multiple of it, so its worker is surely blocked in
     * open() when the timeout fires (on a slow machine a fixed 1.5 s could fire before, and the case would not test
     * a blocked worker at all).
     */
    let reachModelFileMs = 0;

    async function failedServer(
      modelDir: string,
      startTimeoutMs?: number,
    ): Promise<{ server: ServerProcess; stderr: string; ms: number }> {
      const started = performance.now();
      const server = await startFaultServer({
        modelDir,
        until: 'listening',
        ...(startTimeoutMs === undefined ? {} : { startTimeoutMs }),
      });
      const failed = await pollUntil(
        async () => server.stderr(),
        (stderr) => stderr.includes('load failed: '),
        120_000,
        50,
      );
      expect(failed.ok, `no "load failed" within 120 s:\n${server.output()}`).toBe(true);
      return { server, stderr: failed.value, ms: performance.now() - started };
    }

    async function probe(server: ServerProcess) {
      const health = await answer(server.url, '/healthz');
      const ready = await answer(server.url, '/readyz');
      const requests = await Promise.all([
        postJson(server.url, '/generate', { prompt: 'Once upon a time ', max_tokens: 4 }, { timeoutMs: 10_000 }),
        postJson(server.url, '/stream', { prompt: 'Once upon a time ', max_tokens: 4 }, { timeoutMs: 10_000 }),
      ]);
      outcomes.push(...requests);
      const stats = await faultStats(server);
      return { health, ready, requests, stats };
    }

    it.each([
      ['a corrupt ONNX file', 'corruptOnnx'],
      ['a model file that blocks on open (FIFO), startTimeoutMs 3x the time to reach it', 'fifo'],
    ] as const)(
      '%s: not ready (503 with a reason), live, every request 503 UNAVAILABLE + Retry-After at once',
      async (what, dir) => {
        const startTimeoutMs = dir === 'fifo' ? Math.max(1_500, Math.ceil(3 * reachModelFileMs)) : undefined;
        const message =
          startTimeoutMs === undefined
            ? /^load failed: Failed to load the text-generation model from "(.+)": /m
            : new RegExp(
                `^load failed: Inference worker 0 did not load the model from "(.+)" within ${startTimeoutMs} ms$`,
                'm',
              );
        const { server, stderr, ms } = await failedServer(dirs[dir], startTimeoutMs);
        if (dir === 'corruptOnnx') reachModelFileMs = ms;
        try {
          const { health, ready, requests, stats } = await probe(server);
          scenarios.push({
            model: what,
            stderr,
            readyz: JSON.parse(ready.body),
            requests: requests.map((outcome) => (outcome.kind === 'answered' ? outcome.answer.status : outcome.kind)),
          });
          expect(stderr).toMatch(message);
          expect(message.exec(stderr)?.[1]).toBe(dirs[dir]);
          expect(health.status).toBe(200);
          expect([ready.status, JSON.parse(ready.body)]).toEqual([
            503,
            { status: 'unavailable', reasons: ['model is not ready'] },
          ]);
          for (const outcome of requests) {
            expect(outcome.kind).toBe('answered');
            if (outcome.kind !== 'answered') continue;
            expect([outcome.answer.status, errorBody(outcome.answer.body)?.code]).toEqual([503, 'UNAVAILABLE']);
            expect(retryAfterSeconds(outcome.answer.headers)).toBeGreaterThanOrEqual(1);
            expect(leaksInternals(outcome.answer.body)).toBe(false);
          }
          expect(stats.pool).toMatchObject({ readyWorkers: 0, isReady: false });
          if (server.exitInfo() !== undefined) crashes += 1;
        } finally {
          // The FIFO case is stopped by the next test.
          if (dir !== 'fifo') {
            const exit = await server.stop(10_000);
            if (exit.code !== 0) crashes += 1;
          } else fifoServer = server;
        }
      },
    );

    // KNOWN ISSUE (reported): a worker blocked in a native open() can be abandoned but never stopped, and Node's
    // process exit waits for it (and for any thread-pool thread blocked the same way), so the process hangs on
    // SIGTERM and only SIGKILL ends it. `it.fails` keeps this visible: it starts failing once it is fixed.
    it.fails('a model file that blocks on open: the process still exits on SIGTERM', async () => {
      const server = fifoServer;
      expect(server).toBeDefined();
      if (server === undefined) return;
      const exit = await server.stop(3_000);
      scenarios.push({ model: 'FIFO: exit on SIGTERM', exit });
      expect(exit).toEqual({ code: 0, signal: null });
    });

    it('records the fault server runs', () => {
      const answered = outcomes.filter((outcome) => outcome.kind === 'answered').length;
      const result: ScenarioResult = {
        scenario: 'load-failure-fault-server',
        server: 'fault-server',
        requests_sent: outcomes.length,
        answered_exactly_once: answered,
        lost: outcomes.length - answered,
        crashes,
        detail: { runs: scenarios },
      };
      record(result);
      expect([outcomes.length, answered, crashes]).toEqual([4, 4, 0]);
    });
  });
});
