// `microbatch serve --queue` and `microbatch worker` with an OpenTelemetry SDK preloaded in each (`node --import`):
// a request to the replica and the worker batch that generated its answer are one trace, across two processes that
// share nothing but the Redis queue. A Redis of the test's own, the bundled model.
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import {
  type ChildHandle,
  type ServerProcess,
  type TestRedis,
  pollUntil,
  startProcess,
  startRedisServer,
  startServerProcess,
} from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const SDK = fileURLToPath(new URL('./fixtures/trace-to-stdout.mjs', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;

interface PrintedSpan {
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly parentIsRemote: boolean | undefined;
}

function spansOf(process: ChildHandle): PrintedSpan[] {
  return process
    .jsonLines()
    .flatMap((line) =>
      (line as { span?: PrintedSpan }).span === undefined ? [] : [(line as { span: PrintedSpan }).span],
    );
}

describe('microbatch serve --queue + microbatch worker, each with an SDK', () => {
  let redis: TestRedis;
  let replica: ServerProcess | undefined;
  let worker: ChildHandle | undefined;

  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await Promise.all([replica?.stop(), worker?.stop()]);
    await redis.stop();
  });

  it("makes a completion request and the worker's batch for it one trace", async () => {
    worker = startProcess({
      args: ['--import', SDK, BIN, 'worker', '--queue', redis.url, '--model', bundledModelDir()],
    });
    await worker.waitForOutput(/"msg":"worker ready"/, 90_000);
    replica = await startServerProcess({
      args: ['--import', SDK, BIN, 'serve', '--queue', redis.url, '--model', 'tinystories-656k', '--port', '0'],
      ready: READY,
    });
    const { ok: ready } = await pollUntil(
      async () =>
        fetch(`${replica?.url}/readyz`).then(
          (response) => response.status,
          () => 0,
        ),
      (status) => status === 200,
      60_000,
      20,
    );
    expect(ready).toBe(true);
    const response = await fetch(`${replica.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tinystories-656k', prompt: 'The cat', max_tokens: 4 }),
    });
    expect(response.status).toBe(200);
    await response.json();

    const request = await pollUntil(
      async () => spansOf(replica as ServerProcess).find((span) => span.name === 'POST /v1/completions'),
      (span) => span !== undefined,
      30_000,
      20,
    );
    const traceId = request.value?.traceId as string;
    const queued = spansOf(replica).find((span) => span.name === 'microbatch.queue generate');
    expect(queued?.traceId).toBe(traceId);
    expect(queued?.parentSpanId).toBe(request.value?.spanId);
    // The worker process: its batch span continues the request's trace, under the replica's queue span.
    const batch = await pollUntil(
      async () => spansOf(worker as ChildHandle).find((span) => span.name === 'microbatch.batch generate'),
      (span) => span !== undefined,
      30_000,
      20,
    );
    expect(batch.value).toMatchObject({ traceId, parentSpanId: queued?.spanId, parentIsRemote: true });
  });
});
