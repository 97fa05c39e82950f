// One trace across machines, on each transport (drivers.ts): an HTTP request on a web replica (this process, its own
// SDK) and the batch a worker process (its own SDK, spans printed as JSON lines) runs for it, joined only by the trace
// context the queue entry carries. Against a real broker of the test's own.
import { fileURLToPath } from 'node:url';
import { type Span, SpanKind, context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchAttributes, otelTracer } from '@microbatch/core/otel';
import { type ChildHandle, listen, startProcess } from '@microbatch/test-kit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestBroker, type TestQueue, drivers, until } from './drivers.js';

/** A worker span as the worker process printed it. */
interface WorkerSpan {
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly parentIsRemote: boolean;
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>;
  readonly attributes: Record<string, unknown>;
}

// Made before the SDK is registered (in beforeAll), as an app may: it applies from then on.
const replicaTracer = otelTracer();
const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(() => {
  provider.register();
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

function spanNamed(spans: readonly ReadableSpan[], name: string, traceId: string): ReadableSpan {
  const found = spans.find((span) => span.name === name && span.spanContext().traceId === traceId);
  if (found === undefined) throw new Error(`No ${name} span in trace ${traceId}`);
  return found;
}

describe.each(drivers)('tracing through a $name queue', (driver) => {
  let broker: TestBroker;
  let worker: ChildHandle | undefined;
  const queues: TestQueue[] = [];

  beforeAll(async () => {
    broker = await driver.startBroker();
    exporter.reset();
  });
  afterEach(async () => {
    await worker?.stop();
    await Promise.all(queues.map((queue) => queue.close({ force: true })));
    await broker.stop();
  });

  /** A web replica: an HTTP server whose requests each get a server span (as HTTP instrumentation makes) and call `double`. */
  async function startReplica(queueName: string) {
    const queue = driver.replica(broker.url, queueName, { tracer: replicaTracer });
    queues.push(queue);
    await queue.ready;
    await until('the stand-in worker to be heard', async () => (await queue.workersAlive()) > 0);
    const double = queue.batcher<number, number>('double');
    const requestSpans = new Map<number, Span>();
    const server = await listen((req, res) => {
      const input = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('x'));
      trace.getTracer('http').startActiveSpan('GET /double', { kind: SpanKind.SERVER }, (span) => {
        requestSpans.set(input, span);
        double(input).then(
          (value) => {
            res.end(JSON.stringify({ value }));
            span.end();
          },
          () => {
            res.statusCode = 500;
            res.end();
            span.end();
          },
        );
      });
    });
    return { url: server.url, requestSpans, close: server.close };
  }

  /** The trace-context field (`c`) of each entry queued now, parsed. */
  async function entryCarriers(queueName: string): Promise<Array<Record<string, string>>> {
    const entries = await driver.requestEntries(broker.url, queueName);
    return entries.map((fields) => JSON.parse(fields[fields.indexOf('c') + 1] || '{}') as Record<string, string>);
  }

  function workerSpans(): WorkerSpan[] {
    return (worker?.jsonLines() ?? []).flatMap((line) =>
      (line as { span?: WorkerSpan }).span === undefined ? [] : [(line as { span: WorkerSpan }).span],
    );
  }

  it('makes a request through a web replica and a worker process one trace, carried by the queue entry', async () => {
    // Queue `single`: one request, a worker batch of one. Queue `pair`: two requests of two traces, one batch.
    const stopPretending = await driver.pretendWorkerAlive(broker.url, ['single', 'pair']);
    const single = await startReplica('single');
    const pair = await startReplica('pair');
    const answers = [
      fetch(`${single.url}/double?x=1`),
      fetch(`${pair.url}/double?x=2`),
      fetch(`${pair.url}/double?x=3`),
    ].map((response) => response.then((res) => res.json() as Promise<{ value: number }>));
    await until('the three entries', async () => {
      const carriers = [...(await entryCarriers('single')), ...(await entryCarriers('pair'))];
      return carriers.length === 3;
    });

    // The entries carry W3C trace context: each one's `traceparent` is its request's trace, and a span under it.
    const requestTrace = (spans: Map<number, Span>, input: number) => spans.get(input)?.spanContext().traceId;
    const [singleCarrier] = await entryCarriers('single');
    const traceId = requestTrace(single.requestSpans, 1) as string;
    expect(singleCarrier?.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const pairCarriers = await entryCarriers('pair');
    const pairTraces = [requestTrace(pair.requestSpans, 2), requestTrace(pair.requestSpans, 3)] as string[];
    expect(new Set(pairCarriers.map((carrier) => carrier.traceparent?.split('-')[1]))).toEqual(new Set(pairTraces));
    expect(new Set(pairTraces).size).toBe(2);

    // A worker process with its own SDK: nothing but the entries links its spans to the replica's.
    const script = fileURLToPath(new URL('../../packages/redis/test/fixtures/traced-worker.ts', import.meta.url));
    const root = fileURLToPath(new URL('../../', import.meta.url));
    worker = startProcess({
      args: ['--import', 'tsx', script],
      cwd: root,
      env: { ...process.env, ...driver.processEnv(broker.url), QUEUES: 'single,pair' },
    });
    expect((await Promise.all(answers)).map((answer) => answer.value)).toEqual([2, 4, 6]);
    await stopPretending();
    await until('the requests and worker batches to end', () => {
      const names = exporter.getFinishedSpans().map((span) => span.name);
      return names.filter((name) => name === 'GET /double').length === 3 && workerSpans().length >= 7;
    });
    const replicaSpans = exporter.getFinishedSpans();

    // The single request: HTTP span → the replica's queue span → the worker's batch span → the model's span.
    const request = spanNamed(replicaSpans, 'GET /double', traceId);
    const queued = spanNamed(replicaSpans, 'microbatch.queue double', traceId);
    expect(queued.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(singleCarrier?.traceparent?.split('-')[2]).toBe(queued.spanContext().spanId);
    const started = queued.events.find((event) => event.name === 'microbatch.started');
    expect(started?.attributes?.[BatchAttributes.BATCH_SIZE]).toBe(1);
    expect(queued.attributes[BatchAttributes.ITEM_OUTCOME]).toBe('ok');
    const inTrace = workerSpans().filter((span) => span.traceId === traceId);
    const batch = inTrace.find((span) => span.name === 'microbatch.batch double');
    expect(batch?.parentSpanId).toBe(queued.spanContext().spanId);
    expect(batch?.parentIsRemote).toBe(true);
    expect(batch?.attributes[BatchAttributes.BATCH_SIZE]).toBe(1);
    expect(batch?.attributes[BatchAttributes.OUTCOME]).toBe('ok');
    expect(queued.attributes[BatchAttributes.REMOTE_BATCH_ID]).toMatch(/^[0-9a-f]+-\d+$/);
    const model = inTrace.find((span) => span.name === 'model.run');
    expect(model?.parentSpanId).toBe(batch?.spanId);
    // The worker's queue wait is on the request's trace too.
    expect(inTrace.find((span) => span.name === 'microbatch.wait double')?.parentSpanId).toBe(
      queued.spanContext().spanId,
    );

    // Two requests of two traces in one worker batch: its span links to both, each trace gets the worker's wait.
    const pairQueued = pairTraces.map((id) => spanNamed(replicaSpans, 'microbatch.queue double', id));
    const pairBatch = workerSpans().find(
      (span) => span.name === 'microbatch.batch double' && span.attributes[BatchAttributes.BATCH_SIZE] === 2,
    );
    expect(pairBatch?.parentSpanId).toBeUndefined();
    expect(new Set(pairBatch?.links.map((link) => link.spanId))).toEqual(
      new Set(pairQueued.map((span) => span.spanContext().spanId)),
    );
    for (const span of pairQueued) {
      const wait = workerSpans().find(
        (candidate) => candidate.name === 'microbatch.wait double' && candidate.traceId === span.spanContext().traceId,
      );
      expect(wait?.parentSpanId).toBe(span.spanContext().spanId);
      expect(wait?.links.map((link) => link.spanId)).toEqual([pairBatch?.spanId]);
    }
    await Promise.all([single.close(), pair.close()]);
  });
});
