// `microbatch worker` and `microbatch serve --queue` as an operator runs them: a Redis of the test's own, one model
// worker and two web replicas (Express and Koa) in their own processes, on the bundled model.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import {
  type ChildHandle,
  type ServerProcess,
  type TestRedis,
  parseSse,
  sseValues,
  startProcess,
  startRedisServer,
  startServerProcess,
} from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const QUEUE = 'tinystories-656k';
/** The CLI's ready line, as pino writes it off a terminal. */
const READY = /"url":"(http:[^"]+)","msg":"ready"/;

/** One value from Redis, through the `redis-cli` that comes with `redis-server`. */
function redisCli(port: number, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-p', String(port), ...args], (error, stdout) =>
      error ? reject(error) : resolve(stdout.trim()),
    );
  });
}

/** Polls until `check` holds: a hang guard for state outside the test, never a timing assertion. */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 3_000; attempt += 1) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`Gave up waiting for ${what}`);
}

const status = (url: string): Promise<number> =>
  fetch(url).then(
    (response) => response.status,
    () => 0,
  );

describe('microbatch worker + microbatch serve --queue', () => {
  let redis: TestRedis;
  let replicas: ServerProcess[];
  let worker: ChildHandle | undefined;

  beforeAll(async () => {
    redis = await startRedisServer();
    replicas = await Promise.all(
      ['express', 'koa'].map((framework) =>
        startServerProcess({
          args: [BIN, 'serve', '--queue', redis.url, '--model', QUEUE, '--framework', framework, '--port', '0'],
          ready: READY,
        }),
      ),
    );
  });
  afterAll(async () => {
    await Promise.all([...replicas.map((replica) => replica.stop()), worker?.stop()]);
    await redis.stop();
  });

  it('refuses at once with 503 while no worker is alive, as /readyz says, then serves both replicas from one worker, batching across them', async () => {
    const [a, b] = replicas as [ServerProcess, ServerProcess];
    const requests = `microbatch:${QUEUE}:requests`;
    expect(await status(`${a.url}/readyz`)).toBe(503);
    // No worker: refused at admission (the queue's script finds no live heartbeat), never queued to wait for one.
    for (const refused of await Promise.all([fetch(`${a.url}/?text=Hi`), fetch(`${b.url}/?text=Hi`)])) {
      expect([refused.status, refused.headers.get('retry-after')]).toEqual([503, '1']);
      expect(await refused.json()).toMatchObject({ error: { code: 'UNAVAILABLE' } });
    }
    expect(await redisCli(redis.port, ['XLEN', requests])).toBe('0');

    // The worker's first pull finds one request, waits (--batch-wait-ms) and tops the batch up with the others:
    // both replicas' requests in one model call.
    worker = startProcess({
      args: [
        BIN,
        'worker',
        '--queue',
        redis.url,
        '--model',
        bundledModelDir(),
        '--max-batch-size',
        '16',
        '--batch-wait-ms',
        '3000',
      ],
    });
    await worker.waitForOutput(/"worker":"[0-9a-f]+","model":"tinystories-656k","msg":"worker ready"/, 90_000);
    await until(
      'both replicas to be ready',
      async () => (await status(`${a.url}/readyz`)) === 200 && (await status(`${b.url}/readyz`)) === 200,
    );
    const texts = ['The cat', 'The dog', 'A bird', 'The sun'];
    const responses = await Promise.all(
      [a, b].flatMap((replica) => texts.map((text) => fetch(`${replica.url}/?text=${encodeURIComponent(text)}`))),
    );
    expect(responses.map((response) => response.status)).toEqual(Array(8).fill(200));
    const ids = new Set(responses.map((response) => response.headers.get('x-batch-id')));
    // One decode step of the worker's continuous loop, shared by both replicas' requests (the worker's one pull):
    // its id says which worker thread and which step.
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^w0-[0-9a-f]{4}:1$/);
    expect(responses.map((response) => response.headers.get('x-batch-size'))).toEqual(Array(8).fill('8'));
    expect(await responses[0]?.text()).toMatch(/^The cat \S/);
    expect(await redisCli(redis.port, ['XLEN', requests])).toBe('0'); // answered entries are acknowledged and deleted
    // The worker logs the batch as fields: both replicas' requests in one model call.
    const batch = (worker.jsonLines() as Array<Record<string, unknown>>).find((line) => line.msg === 'batch');
    expect(batch).toMatchObject({ handler: 'generate', batchSize: 8, replicas: 2, failed: 0 });
    expect(worker.jsonLines().filter((line) => (line as { msg?: string }).msg === 'broker up')).toHaveLength(1);
    // Each replica logged where it started from and the worker's arrival, once each.
    for (const replica of [a, b]) {
      const events = (replica.jsonLines() as Array<{ event?: string }>).flatMap((line) => line.event ?? []);
      expect(events).toEqual(['broker-up', 'workers-down', 'workers-up']);
    }
  });

  it('streams completions through the queue as Server-Sent Events', async () => {
    const b = replicas[1] as ServerProcess;
    const response = await fetch(`${b.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: ['Once upon a time ', 'The dog '], max_tokens: 8, stream: true }),
    });
    expect(response.status).toBe(200);
    const { values, done } = sseValues(parseSse(await response.text()));
    expect(done).toBe(true);
    const chunks = values as Array<{
      object: string;
      model: string;
      choices: Array<{ index: number; finish_reason: string | null }>;
    }>;
    expect(new Set(chunks.map((chunk) => chunk.choices[0]?.index))).toEqual(new Set([0, 1]));
    expect(chunks.every((chunk) => chunk.object === 'text_completion' && chunk.model === QUEUE)).toBe(true);
    // Each prompt's stream ends with its finish reason.
    expect(chunks.filter((chunk) => chunk.choices[0]?.finish_reason !== null)).toHaveLength(2);
  });

  it('refuses invalid requests on the replica with 400, before anything is queued', async () => {
    const a = replicas[0] as ServerProcess;
    const response = await fetch(`${a.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Hi ', max_tokens: 0 }),
    });
    expect([response.status, ((await response.json()) as { error: { details: unknown } }).error.details]).toEqual([
      400,
      { field: 'max_tokens' },
    ]);
  });

  it('stops the worker on SIGTERM (exit 0), after which the replicas report not ready and refuse at once', async () => {
    const exit = await (worker as ChildHandle).stop();
    expect(exit.code).toBe(0);
    const a = replicas[0] as ServerProcess;
    await until('the replica to notice', async () => (await status(`${a.url}/readyz`)) === 503);
    // A worker that stops removes its heartbeat: the next request is refused at admission.
    expect(await status(`${a.url}/?text=Hi`)).toBe(503);
    const workersDown = (): number =>
      (a.jsonLines() as Array<{ event?: string }>).filter((line) => line.event === 'workers-down').length;
    await until('the replica to log it', async () => workersDown() === 2);
    const stopped = await Promise.all(replicas.map((replica) => replica.stop()));
    expect(stopped.map((info) => info.code)).toEqual([0, 0]);
  });
});
