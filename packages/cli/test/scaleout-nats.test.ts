// `microbatch worker --queue nats://…` and `microbatch serve --queue nats://…`: the same commands as over Redis
// (scaleout.test.ts), on a nats-server -js of the test's own; the URL's scheme picks the transport.
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import {
  type ChildHandle,
  type ServerProcess,
  type TestNats,
  parseSse,
  sseValues,
  startNatsServer,
  startProcess,
  startServerProcess,
} from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;

const status = (url: string): Promise<number> =>
  fetch(url).then(
    (response) => response.status,
    () => 0,
  );

describe('microbatch worker + microbatch serve --queue nats://', () => {
  let nats: TestNats;
  let replica: ServerProcess;
  let worker: ChildHandle | undefined;

  beforeAll(async () => {
    nats = await startNatsServer();
    replica = await startServerProcess({
      args: [BIN, 'serve', '--queue', nats.url, '--model', 'tinystories-656k', '--framework', 'express', '--port', '0'],
      ready: READY,
    });
  });
  afterAll(async () => {
    await Promise.all([replica.stop(), worker?.stop()]);
    await nats.stop();
  });

  it('refuses with 503 while no worker is alive, then serves whole and streamed completions from a worker', async () => {
    expect(await status(`${replica.url}/readyz`)).toBe(503);
    const refused = await fetch(`${replica.url}/?text=Hi`);
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([503, '1']);
    expect(await refused.json()).toMatchObject({ error: { code: 'UNAVAILABLE' } });

    worker = startProcess({ args: [BIN, 'worker', '--queue', nats.url, '--model', bundledModelDir()] });
    await worker.waitForOutput(/"model":"tinystories-656k","msg":"worker ready"/, 90_000);
    for (let attempt = 0; attempt < 3_000 && (await status(`${replica.url}/readyz`)) !== 200; attempt += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const texts = ['The cat', 'The dog', 'A bird'];
    const responses = await Promise.all(texts.map((text) => fetch(`${replica.url}/?text=${encodeURIComponent(text)}`)));
    expect(responses.map((response) => response.status)).toEqual([200, 200, 200]);
    expect(await responses[0]?.text()).toMatch(/^The cat \S/);

    const streamed = await fetch(`${replica.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time ', max_tokens: 8, stream: true }),
    });
    expect(streamed.status).toBe(200);
    const { values, done } = sseValues(parseSse(await streamed.text()));
    expect(done).toBe(true);
    const chunks = values as Array<{ choices: Array<{ finish_reason: string | null }> }>;
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.filter((chunk) => chunk.choices[0]?.finish_reason !== null)).toHaveLength(1);
    // The worker logged its batches as fields, and the replica its broker and workers, once per change.
    const batches = (worker.jsonLines() as Array<Record<string, unknown>>).filter((line) => line.msg === 'batch');
    expect(batches.length).toBeGreaterThan(0);
    const events = (replica.jsonLines() as Array<{ event?: string }>).flatMap((line) => line.event ?? []);
    expect(events).toEqual(['broker-up', 'workers-down', 'workers-up']);
  });
});

describe('microbatch worker + microbatch serve --queue nats:// while NATS is unreachable', () => {
  let nats: TestNats;
  const children: ChildHandle[] = [];
  beforeAll(async () => {
    nats = await startNatsServer();
    await nats.kill(); // its port and store stay: `restart()` brings NATS up where the processes look for it
  });
  afterAll(async () => {
    await Promise.all(children.map((child) => child.stop(1_000)));
    await nats.stop();
  });

  const start = (args: readonly string[]): ChildHandle => {
    const child = startProcess({ args: [BIN, ...args, '--queue', nats.url] });
    children.push(child);
    return child;
  };
  const startBoth = (): { replica: ChildHandle; worker: ChildHandle } => ({
    replica: start(['serve', '--model', 'tinystories-656k', '--framework', 'express', '--port', '0']),
    worker: start(['worker', '--model', bundledModelDir()]),
  });
  /** SIGTERM; resolves with how it ended (a hang guard bounds the wait: it used to hang for good). */
  const terminate = async (child: ChildHandle): Promise<{ code: number | null; log: string | undefined }> => {
    const signalled = performance.now();
    child.child.kill('SIGTERM');
    const { code } = await child.exited;
    console.log(
      `[NATS unreachable] ${child.pid} exited ${code} ${Math.round(performance.now() - signalled)} ms after SIGTERM`,
    );
    const log = (child.jsonLines() as Array<{ msg?: string }>)
      .map((line) => line.msg)
      .find((msg) => msg?.includes('exiting'));
    return { code, log };
  };

  it('starts anyway: each process logs the failed connection, retries, and serves once NATS appears', async () => {
    const { replica, worker } = startBoth();
    // Said once each, with why (the connection refused), while they keep trying.
    await replica.waitForOutput(/"event":"broker-down"[^\n]*"error":"[^"]+"/, 90_000);
    await worker.waitForOutput(/"error":"[^"]+"[^\n]*"msg":"broker unreachable"/, 90_000);
    const [, url] = await replica.waitForOutput(/"url":"(http:[^"]+)","msg":"listening"/, 90_000);
    expect(await status(`${url}/readyz`)).toBe(503);

    await nats.restart();
    await worker.waitForOutput(/"msg":"worker ready"/, 90_000);
    await replica.waitForOutput(/"url":"http:[^"]+","msg":"ready"/, 90_000);
    for (let attempt = 0; attempt < 3_000 && (await status(`${url}/readyz`)) !== 200; attempt += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const response = await fetch(`${url}/?text=${encodeURIComponent('The cat')}`);
    expect(response.status).toBe(200);
    expect(await response.text()).toMatch(/^The cat \S/);
    const downs = (worker.jsonLines() as Array<{ msg?: string }>).filter((line) => line.msg === 'broker unreachable');
    expect(downs).toHaveLength(1);

    // NATS goes again: SIGTERM still ends both (they drained while disconnected), exit code 0.
    await nats.kill();
    await replica.waitForOutput(/"event":"broker-down"[^\n]*"msg":"lost the queue/, 30_000);
    await worker.waitForOutput(/"msg":"broker down"/, 30_000);
    expect(await Promise.all([terminate(replica), terminate(worker)])).toEqual([
      { code: 0, log: 'drained and closed; exiting' },
      { code: 0, log: 'drained and closed; exiting' },
    ]);
  }, 240_000);

  it('refuses at start-up a model whose name cannot name a NATS queue (too long), saying why, exit 1', async () => {
    const model = 'm'.repeat(300);
    const replica = start(['serve', '--model', model, '--framework', 'express', '--port', '0']);
    const { code } = await replica.exited;
    expect(code).toBe(1);
    expect(replica.stderr()).toContain(
      `--model "${model}" cannot name a NATS queue: Expected \`queue\` to be a name whose NATS streams fit JetStream's ` +
        '255 characters: `<prefix>_<queue>_progress` would be 320 characters',
    );
  });

  it('exits on SIGTERM while NATS was never reached (it used to wait for a first connection for good)', async () => {
    const { replica, worker } = startBoth();
    await replica.waitForOutput(/"event":"broker-down"/, 90_000);
    await worker.waitForOutput(/"msg":"broker unreachable"/, 90_000);
    expect(await Promise.all([terminate(replica), terminate(worker)])).toEqual([
      { code: 0, log: 'drained and closed; exiting' },
      { code: 0, log: 'drained and closed; exiting' },
    ]);
  }, 240_000);
});
