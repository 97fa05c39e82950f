import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { type Span, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BatchError, ErrorCode, combineTracers, createBatcher } from '@microbatch/core';
import { BATCH_CHANNEL, type BatchMessage, diagnosticsTracer } from '@microbatch/core/diagnostics';
import { BatchAttributes, otelTracer } from '@microbatch/core/otel';

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(() => {
  // What an application does: register the SDK (an AsyncLocalStorage context manager and the global provider).
  provider.register();
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  context.disable();
});
beforeEach(() => {
  exporter.reset();
});

/** Runs `work` under a new recording span, as a web framework's instrumentation does for each request. */
function underSpan<T>(name: string, work: (span: Span) => Promise<T>): Promise<T> {
  return trace.getTracer('test').startActiveSpan(name, async (span) => {
    try {
      return await work(span);
    } finally {
      span.end();
    }
  });
}

describe('otelTracer', () => {
  it('makes a batch span linked to the span of each call it served, with its size, id and name', async () => {
    const handlerParents: Array<string | undefined> = [];
    const batcher = createBatcher(
      async (inputs: number[]) => {
        handlerParents.push(trace.getActiveSpan()?.spanContext().spanId);
        return inputs.map((input) => input * 2);
      },
      { name: 'double', maxBatchSize: 8, tracer: otelTracer() },
    );
    const parents: string[] = [];
    const results = await Promise.all(
      [1, 2, 3].map((input) =>
        underSpan(`request ${input}`, async (span) => {
          parents.push(span.spanContext().spanId);
          return batcher.call(input);
        }),
      ),
    );
    expect(results).toEqual([2, 4, 6]);
    const spans = exporter.getFinishedSpans();
    const batches = spans.filter((span) => span.name === 'microbatch.batch double');
    expect(batches).toHaveLength(1);
    const [batch] = batches;
    expect(batch?.attributes[BatchAttributes.BATCH_SIZE]).toBe(3);
    expect(batch?.attributes[BatchAttributes.BATCH_ID]).toBe(1);
    expect(batch?.attributes[BatchAttributes.BATCHER]).toBe('double');
    expect(batch?.attributes[BatchAttributes.OUTCOME]).toBe('ok');
    expect(typeof batch?.attributes[BatchAttributes.QUEUE_WAIT_MAX_MS]).toBe('number');
    expect(new Set(batch?.links.map((link) => link.context.spanId))).toEqual(new Set(parents));
    expect(batch?.links).toHaveLength(3);
    // A batch serves many traces: it starts its own, and the handler runs in it.
    expect(batch?.parentSpanContext).toBeUndefined();
    expect(handlerParents).toEqual([batch?.spanContext().spanId]);
    // Each caller's trace shows its wait: a child of its request span, linked to the batch.
    const waits = spans.filter((span) => span.name === 'microbatch.wait double');
    expect(new Set(waits.map((wait) => wait.parentSpanContext?.spanId))).toEqual(new Set(parents));
    expect(waits).toHaveLength(3);
    for (const wait of waits) {
      expect(wait.links.map((link) => link.context.spanId)).toEqual([batch?.spanContext().spanId]);
      expect(wait.attributes[BatchAttributes.BATCH_ID]).toBe(1);
    }
  });

  it('splits links across batches as the calls were batched, and marks a failed batch', async () => {
    const batcher = createBatcher(
      async (inputs: number[]) => {
        if (inputs.includes(99)) throw new Error('model failed');
        return inputs;
      },
      { name: 'two', maxBatchSize: 2, tracer: otelTracer({ waitSpans: false }) },
    );
    const outcomes = await Promise.allSettled(
      [1, 2, 99].map((input) => underSpan(`request ${input}`, async () => batcher.call(input))),
    );
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const batches = exporter
      .getFinishedSpans()
      .filter((span) => span.name === 'microbatch.batch two')
      .toSorted(
        (a, b) => Number(a.attributes[BatchAttributes.BATCH_ID]) - Number(b.attributes[BatchAttributes.BATCH_ID]),
      );
    expect(batches.map((span) => [span.attributes[BatchAttributes.BATCH_SIZE], span.links.length])).toEqual([
      [2, 2],
      [1, 1],
    ]);
    expect(batches.map((span) => span.attributes[BatchAttributes.OUTCOME])).toEqual(['ok', 'error']);
    expect(exporter.getFinishedSpans().some((span) => span.name.startsWith('microbatch.wait'))).toBe(false);
  });

  it('records a batch without links when its calls had no active span', async () => {
    const batcher = createBatcher(async (inputs: number[]) => inputs, { name: 'bare', tracer: otelTracer() });
    await Promise.all([batcher.call(1), batcher.call(2)]);
    const [batch] = exporter.getFinishedSpans();
    expect(batch?.name).toBe('microbatch.batch bare');
    expect(batch?.links).toEqual([]);
    expect(batch?.attributes[BatchAttributes.BATCH_SIZE]).toBe(2);
  });

  it('refuses a tracer that is not one', () => {
    expect(() => createBatcher(async (inputs: number[]) => inputs, { tracer: {} as never })).toThrow(
      'Expected `tracer` to be an object with `capture` and `startBatch` functions',
    );
    expect(() => otelTracer({ waitSpans: 'yes' as never })).toThrow('Expected `waitSpans` to be a boolean');
    expect(() => otelTracer({ propagator: {} as never })).toThrow(
      'Expected `propagator` to be an OpenTelemetry TextMapPropagator',
    );
    const tracer = { capture: () => undefined, startBatch: () => undefined, send: 'no' };
    expect(() => createBatcher(async (inputs: number[]) => inputs, { tracer: tracer as never })).toThrow(
      'Expected `tracer.send` to be a function when given',
    );
  });
});

describe('otelTracer across processes (send / extract)', () => {
  it("sends a caller's context as W3C traceparent under a queue span, and a batch of one extracted call is its child", async () => {
    const tracer = otelTracer();
    const sent = await underSpan('request', async (request) => {
      const item = tracer.send?.(tracer.capture(), { batcher: 'remote' });
      return { item, request: request.spanContext() };
    });
    const carrier = sent.item?.carrier ?? {};
    expect(carrier.traceparent).toMatch(new RegExp(`^00-${sent.request.traceId}-[0-9a-f]{16}-01$`));
    sent.item?.started({ batchId: 'w1-7', size: 1, queueWaitMs: 3 });
    sent.item?.end(undefined);
    // What the worker's side makes of the carrier: a remote caller whose batch span continues the trace.
    const caller = combineTracers(tracer).extract?.(carrier);
    const span = tracer.startBatch({
      batcher: 'remote',
      batchId: 1,
      size: 1,
      maxBatchSize: 4,
      key: undefined,
      callers: [caller],
      queueTimesMs: [3],
    });
    span?.end({ outcome: 'ok', failed: 0, executionMs: 1 });
    const spans = exporter.getFinishedSpans();
    const queued = spans.find((one) => one.name === 'microbatch.queue remote');
    expect(queued?.parentSpanContext?.spanId).toBe(sent.request.spanId);
    expect(queued?.attributes[BatchAttributes.REMOTE_BATCH_ID]).toBe('w1-7');
    expect(queued?.events.map((event) => event.name)).toEqual(['microbatch.started']);
    const batch = spans.find((one) => one.name === 'microbatch.batch remote');
    expect(batch?.spanContext().traceId).toBe(sent.request.traceId);
    expect(batch?.parentSpanContext?.spanId).toBe(queued?.spanContext().spanId);
    expect(batch?.parentSpanContext?.isRemote).toBe(true);
    const wait = spans.find((one) => one.name === 'microbatch.wait remote');
    expect(wait?.parentSpanContext?.spanId).toBe(queued?.spanContext().spanId);
    expect(queued?.attributes[BatchAttributes.ITEM_OUTCOME]).toBe('ok');
  });

  it("ends an item's queue span with its refusal's code (an error) or as cancelled (no error)", async () => {
    const tracer = otelTracer();
    await underSpan('request', async () => {
      tracer.send?.(tracer.capture(), { batcher: 'full' })?.end(new BatchError(ErrorCode.QUEUE_FULL, 'full'));
      tracer.send?.(tracer.capture(), { batcher: 'left' })?.end(new DOMException('gone', 'AbortError'));
    });
    const spans = exporter.getFinishedSpans();
    const full = spans.find((one) => one.name === 'microbatch.queue full');
    expect(full?.attributes[BatchAttributes.ITEM_OUTCOME]).toBe('QUEUE_FULL');
    expect(full?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'QUEUE_FULL' });
    const left = spans.find((one) => one.name === 'microbatch.queue left');
    expect(left?.attributes[BatchAttributes.ITEM_OUTCOME]).toBe('cancelled');
    expect(left?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('sends nothing without a caller span, reads nothing from a carrier without a valid traceparent, and combines', () => {
    const tracer = otelTracer();
    expect(tracer.send?.(tracer.capture(), { batcher: 'x' })).toBeUndefined();
    expect(tracer.extract?.({})).toBeUndefined();
    expect(tracer.extract?.({ traceparent: '00-zz-yy-01' })).toBeUndefined();
    const fixed = (key: string) => ({
      capture: () => key,
      startBatch: () => undefined,
      send: (captured: unknown) => ({
        carrier: { [key]: String(captured) },
        started: () => undefined,
        end: () => undefined,
      }),
      extract: (carrier: Readonly<Record<string, string>>) => carrier[key],
    });
    const both = combineTracers(fixed('a'), fixed('b'));
    const item = both.send?.(both.capture(), { batcher: 'x' });
    expect(item?.carrier).toEqual({ a: 'a', b: 'b' });
    expect(both.extract?.({ a: '1', b: '2' })).toEqual(['1', '2']);
  });
});

describe('diagnosticsTracer', () => {
  it('publishes each batch on the microbatch:batch tracing channel, and runs with otelTracer', async () => {
    const events: Array<[string, number, string | undefined]> = [];
    const listeners = (['start', 'end', 'asyncStart', 'asyncEnd'] as const).map((event) => {
      const name = `tracing:${BATCH_CHANNEL}:${event}`;
      const listener = (message: unknown): void => {
        const { size, outcome } = message as BatchMessage;
        events.push([event, size, outcome?.outcome]);
      };
      subscribe(name, listener);
      return () => unsubscribe(name, listener);
    });
    try {
      const batcher = createBatcher(async (inputs: number[]) => inputs, {
        name: 'both',
        tracer: combineTracers(otelTracer(), diagnosticsTracer()),
      });
      await underSpan('request', async () => Promise.all([batcher.call(1), batcher.call(2)]));
      expect(events).toEqual([
        ['start', 2, undefined],
        ['end', 2, undefined],
        ['asyncStart', 2, 'ok'],
        ['asyncEnd', 2, 'ok'],
      ]);
      const batch = exporter.getFinishedSpans().find((span) => span.name === 'microbatch.batch both');
      expect(batch?.links).toHaveLength(2);
    } finally {
      for (const stop of listeners) stop();
    }
  });
});
