// One trace across machines over NATS: an HTTP request on a web replica (this process, its own SDK) and the batch a
// worker process (its own SDK, spans printed as JSON lines; the Redis trace test's fixture, on NATS) runs for it,
// joined only by the trace context the JetStream entry carries. Against a real `nats-server -js` of the test's own.
import { fileURLToPath } from 'node:url';
import { type Span, SpanKind, context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchAttributes, otelTracer } from '@microbatch/core/otel';
import { type NatsQueue, createNatsQueue } from '@microbatch/nats';
import {
  type ChildHandle,
  type TestNats,
  listen,
  pollUntil,
  startNatsServer,
  startProcess,
} from '@microbatch/test-kit';
import { jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface WorkerSpan {
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly parentIsRemote: boolean;
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>;
  readonly attributes: Record<string, unknown>;
}

const replicaTracer = otelTracer();
const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let nats: TestNats;
let inspector: NatsConnection;
let worker: ChildHandle | undefined;
const queues: NatsQueue[] = [];

beforeAll(async () => {
  provider.register();
  nats = await startNatsServer();
  inspector = await connect({ servers: nats.url.replace('nats://', '') });
});
afterAll(async () => {
  await worker?.stop();
  await Promise.all(queues.map((queue) => queue.close({ force: true })));
  await inspector.close();
  await nats.stop();
  await provider.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const { ok } = await pollUntil(async () => await check(), Boolean, 60_000, 10);
  if (!ok) throw new Error(`Gave up waiting for ${what}`);
}

/** A web replica: an HTTP server whose requests each get a server span and call `double`. */
async function startReplica(queueName: string) {
  const queue = createNatsQueue({ url: nats.url, queue: queueName, tracer: replicaTracer });
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

/**
 * Announces a stand-in worker on the queues' `workers` subject, so the replicas admit entries before any worker runs:
 * the test reads them in the stream before a worker takes them, and the worker started later pulls them in one batch.
 */
function pretendWorkerAlive(queueNames: readonly string[]): () => void {
  const announce = () => {
    for (const name of queueNames)
      inspector.publish(
        `microbatch.${name}.workers`,
        JSON.stringify({ id: 'stand-in', settings: { maxBatchSize: 8, batchWaitTimeoutMs: 0, concurrency: 1 } }),
      );
  };
  announce();
  const timer = setInterval(announce, 200);
  return () => clearInterval(timer);
}

/** The trace-context field (`c`) of each entry in the queue's stream now, parsed. */
async function entryCarriers(queueName: string): Promise<Array<Record<string, string>>> {
  const manager = await jetstreamManager(inspector);
  const stream = `microbatch_${queueName}`;
  const { state } = await manager.streams.info(stream);
  const carriers: Array<Record<string, string>> = [];
  for (let seq = state.first_seq; state.messages > 0 && seq <= state.last_seq; seq += 1) {
    const message = await manager.streams.getMessage(stream, { seq }).catch(() => null);
    if (message === null) continue;
    const fields = JSON.parse(message.string()) as string[];
    carriers.push(JSON.parse(fields[fields.indexOf('c') + 1] || '{}') as Record<string, string>);
  }
  return carriers;
}

function workerSpans(): WorkerSpan[] {
  return (worker?.jsonLines() ?? []).flatMap((line) =>
    (line as { span?: WorkerSpan }).span === undefined ? [] : [(line as { span: WorkerSpan }).span],
  );
}

function spanNamed(spans: readonly ReadableSpan[], name: string, traceId: string): ReadableSpan {
  const found = spans.find((span) => span.name === name && span.spanContext().traceId === traceId);
  if (found === undefined) throw new Error(`No ${name} span in trace ${traceId}`);
  return found;
}

describe('tracing through a NATS JetStream queue', () => {
  it('makes a request through a web replica and a worker process one trace, carried by the stream entry', async () => {
    const stopPretending = pretendWorkerAlive(['single', 'pair']);
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

    // The entries carry W3C trace context: each one's `traceparent` is its request's trace.
    const requestTrace = (spans: Map<number, Span>, input: number) => spans.get(input)?.spanContext().traceId;
    const [singleCarrier] = await entryCarriers('single');
    const traceId = requestTrace(single.requestSpans, 1) as string;
    expect(singleCarrier?.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const pairTraces = [requestTrace(pair.requestSpans, 2), requestTrace(pair.requestSpans, 3)] as string[];
    const pairCarriers = await entryCarriers('pair');
    expect(new Set(pairCarriers.map((carrier) => carrier.traceparent?.split('-')[1]))).toEqual(new Set(pairTraces));
    expect(new Set(pairTraces).size).toBe(2);

    const script = fileURLToPath(new URL('../../redis/test/fixtures/traced-worker.ts', import.meta.url));
    const root = fileURLToPath(new URL('../../../', import.meta.url));
    worker = startProcess({
      args: ['--import', 'tsx', script],
      cwd: root,
      env: { ...process.env, TRANSPORT: 'nats', NATS_URL: nats.url, QUEUES: 'single,pair' },
    });
    expect((await Promise.all(answers)).map((answer) => answer.value)).toEqual([2, 4, 6]);
    stopPretending();
    await until('the requests and worker batches to end', () => {
      const names = exporter.getFinishedSpans().map((span) => span.name);
      return names.filter((name) => name === 'GET /double').length === 3 && workerSpans().length >= 7;
    });
    const replicaSpans = exporter.getFinishedSpans();

    // HTTP span → the replica's queue span → the worker's batch span → the model's span.
    const request = spanNamed(replicaSpans, 'GET /double', traceId);
    const queued = spanNamed(replicaSpans, 'microbatch.queue double', traceId);
    expect(queued.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(singleCarrier?.traceparent?.split('-')[2]).toBe(queued.spanContext().spanId);
    expect(
      queued.events.find((event) => event.name === 'microbatch.started')?.attributes?.[BatchAttributes.BATCH_SIZE],
    ).toBe(1);
    expect(queued.attributes[BatchAttributes.ITEM_OUTCOME]).toBe('ok');
    expect(queued.attributes[BatchAttributes.REMOTE_BATCH_ID]).toMatch(/^[0-9a-f]+-\d+$/);
    const inTrace = workerSpans().filter((span) => span.traceId === traceId);
    const batch = inTrace.find((span) => span.name === 'microbatch.batch double');
    expect(batch?.parentSpanId).toBe(queued.spanContext().spanId);
    expect(batch?.parentIsRemote).toBe(true);
    expect(batch?.attributes[BatchAttributes.BATCH_SIZE]).toBe(1);
    expect(batch?.attributes[BatchAttributes.OUTCOME]).toBe('ok');
    expect(inTrace.find((span) => span.name === 'model.run')?.parentSpanId).toBe(batch?.spanId);
    expect(inTrace.find((span) => span.name === 'microbatch.wait double')?.parentSpanId).toBe(
      queued.spanContext().spanId,
    );

    // Two requests of two traces in one worker batch: its span links to both.
    const pairQueued = pairTraces.map((id) => spanNamed(replicaSpans, 'microbatch.queue double', id));
    const pairBatch = workerSpans().find(
      (span) => span.name === 'microbatch.batch double' && span.attributes[BatchAttributes.BATCH_SIZE] === 2,
    );
    expect(pairBatch?.parentSpanId).toBeUndefined();
    expect(new Set(pairBatch?.links.map((link) => link.spanId))).toEqual(
      new Set(pairQueued.map((span) => span.spanContext().spanId)),
    );
    await Promise.all([single.close(), pair.close()]);
  });
});
