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
