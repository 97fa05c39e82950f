// `@microbatch/core/otel`: batches as OpenTelemetry spans, through `@opentelemetry/api` only (an optional peer
// dependency of `@microbatch/core`: the main entry never loads it). Without an SDK registered every span is a no-op.
import {
  type Context,
  type Link,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type TextMapPropagator,
  type Tracer,
  type TracerProvider,
  context,
  createContextKey,
  isSpanContextValid,
  propagation,
  trace,
} from '@opentelemetry/api';
import type { BatchOutcome, BatchSpan, BatchTracer, SentItem, TracedBatch } from '../tracing.js';
import { BatchAttributes } from './attributes.js';
import { type SendTarget, extractCaller, sendItem } from './remote.js';

/** Options of {@link otelTracer}. */
export interface OtelTracerOptions {
  /**
   * Where spans go.
   * @default the global tracer provider (`trace.getTracerProvider()`), so an SDK registered later still applies
   */
  readonly tracerProvider?: TracerProvider;
  /**
   * Whether each traced call also gets a `microbatch.wait NAME` child span on its own trace, from the call to its
   * batch's dispatch, linked to the batch span: the caller's trace shows its queue wait.
   * @default true
   */
  readonly waitSpans?: boolean;
  /**
   * How a caller's context is written into, and read from, an item sent to another process (a Redis queue entry).
   * @default the global propagator (`propagation`, as the SDK registers it: W3C `traceparent` / `tracestate`)
   */
  readonly propagator?: TextMapPropagator;
}

export { BatchAttributes } from './attributes.js';

const now = (): number => performance.timeOrigin + performance.now();

/**
 * A batcher `tracer` that makes each batch an OpenTelemetry span, `microbatch.batch NAME`, linked to the active
 * span of every call it served (captured when the call was made), with the batch's size, id, batcher name, queue
 * waits and outcome as attributes; the handler runs in the batch span's context, so its own spans (HTTP clients,
 * database calls) are the batch's children. Each call's queue wait is a `microbatch.wait NAME` child span on the
 * caller's trace. Without an SDK registered (and no `tracerProvider` given), it does nothing but check, once per
 * batch, whether one has been registered since.
 *
 * @example
 * ```ts
 * import { createBatcher } from '@microbatch/core';
 * import { otelTracer } from '@microbatch/core/otel';
 *
 * const embed = createBatcher(embedTexts, { name: 'embed', tracer: otelTracer() });
 * ```
 */
export function otelTracer(options: OtelTracerOptions = {}): BatchTracer {
  if (typeof options !== 'object' || options === null) throw new TypeError('Expected `options` to be an object');
  const { tracerProvider, waitSpans = true, propagator } = options;
  if (typeof waitSpans !== 'boolean') throw new TypeError('Expected `waitSpans` to be a boolean');
  if (propagator !== undefined && typeof propagator?.inject !== 'function')
    throw new TypeError('Expected `propagator` to be an OpenTelemetry TextMapPropagator');
  const propagate: SendTarget['propagator'] = propagator ?? propagation;
  if (tracerProvider !== undefined && typeof tracerProvider?.getTracer !== 'function')
    throw new TypeError('Expected `tracerProvider` to be an OpenTelemetry TracerProvider');
  let tracer: Tracer | undefined;
  // Whether calls should capture their context: only while spans are recorded and a context manager propagates
  // them. Checked again at each batch, so an SDK registered after the batcher was made applies from then on.
  let capturing = false;
  const refresh = (): void => {
    tracer ??= tracerProvider?.getTracer(NAME) ?? registeredTracer();
    capturing = tracer !== undefined && contextPropagates();
  };
  refresh();
  const capture = (): unknown => {
    if (!capturing) return undefined;
    const active = context.active();
    return active === ROOT_CONTEXT ? undefined : active;
  };
  return {
    capture,
    startBatch(batch: TracedBatch): BatchSpan | undefined {
      refresh();
      // No SDK: no span, not even a non-recording one (a batch's worth of work for nothing).
      return tracer === undefined ? undefined : startBatch(tracer, batch, waitSpans);
    },
    send(captured: unknown, item: { readonly batcher: string }): SentItem | undefined {
      // A transport's replica starts no batches, so it checks here for an SDK registered since; `send` runs in the
      // caller's context, right after `capture`, so what was not captured then is the active context now.
      if (!capturing) {
        refresh();
        if (!capturing) return undefined;
        captured ??= capture();
      }
      return tracer === undefined || captured === undefined
        ? undefined
        : sendItem({ tracer, propagator: propagate }, captured as Context, item.batcher);
    },
    extract(carrier: Readonly<Record<string, string>>): unknown {
      return extractCaller(propagate, carrier);
    },
  };
}

const NAME = '@microbatch/core';

/** The registered SDK's tracer, or `undefined` while no tracer provider is registered. */
function registeredTracer(): Tracer | undefined {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider ? provider.getDelegateTracer(NAME) : provider.getTracer(NAME);
}

const PROBE_KEY = createContextKey('microbatch.probe');
const PROBE = ROOT_CONTEXT.setValue(PROBE_KEY, true);

/** Whether a context manager is registered: the no-op one that the API falls back to never enters a context. */
function contextPropagates(): boolean {
  return context.with(PROBE, () => context.active()) === PROBE;
}

function startBatch(tracer: Tracer, batch: TracedBatch, waitSpans: boolean): BatchSpan {
  const { batcher, batchId, size, callers, queueTimesMs } = batch;
  const links: Link[] = [];
  for (const caller of callers) {
    if (caller === undefined) continue;
    const spanContext = trace.getSpanContext(caller as Context);
    if (spanContext !== undefined && isSpanContextValid(spanContext)) links.push({ context: spanContext });
  }
  const startTime = now();
  // A batch of one call sent from another process (a queue entry) is that call's child, as a messaging consumer
  // processing one message is (OTel messaging conventions): the request's trace goes on into the worker's batch.
  const parent = size === 1 && links.length === 1 && links[0]?.context.isRemote === true ? callers[0] : undefined;
  let maxWait = 0;
  let sumWait = 0;
  for (const wait of queueTimesMs) {
    sumWait += wait;
    if (wait > maxWait) maxWait = wait;
  }
  const span = tracer.startSpan(
    `microbatch.batch ${batcher}`,
    {
      kind: SpanKind.INTERNAL,
      root: parent === undefined,
      links,
      startTime,
      attributes: {
        [BatchAttributes.BATCHER]: batcher,
        [BatchAttributes.BATCH_ID]: batchId,
        [BatchAttributes.BATCH_SIZE]: size,
        [BatchAttributes.MAX_BATCH_SIZE]: batch.maxBatchSize,
        [BatchAttributes.QUEUE_WAIT_MAX_MS]: maxWait,
        [BatchAttributes.QUEUE_WAIT_MEAN_MS]: size === 0 ? 0 : sumWait / size,
      },
    },
    (parent as Context | undefined) ?? ROOT_CONTEXT,
  );
  if (waitSpans && links.length > 0) recordWaits(tracer, span, batch, startTime);
  const batchContext = trace.setSpan(ROOT_CONTEXT, span);
  return {
    enter(run: () => void): void {
      context.with(batchContext, run);
    },
    end(outcome: BatchOutcome): void {
      endBatch(span, outcome);
    },
  };
}

/** A child span per traced call on the caller's own trace: from the call to the batch's dispatch. */
function recordWaits(tracer: Tracer, batchSpan: Span, batch: TracedBatch, dispatchedAt: number): void {
  const links: Link[] = [{ context: batchSpan.spanContext() }];
  const { callers, queueTimesMs, batcher, batchId, size } = batch;
  for (let index = 0; index < callers.length; index += 1) {
    const caller = callers[index] as Context | undefined;
    if (caller === undefined || !recordsOn(caller)) continue;
    const waitMs = queueTimesMs[index] as number;
    const wait = tracer.startSpan(
      `microbatch.wait ${batcher}`,
      {
        kind: SpanKind.INTERNAL,
        links,
        startTime: dispatchedAt - waitMs,
        attributes: {
          [BatchAttributes.BATCHER]: batcher,
          [BatchAttributes.BATCH_ID]: batchId,
          [BatchAttributes.BATCH_SIZE]: size,
          [BatchAttributes.QUEUE_WAIT_MS]: waitMs,
        },
      },
      caller,
    );
    wait.end(dispatchedAt);
  }
}

/**
 * Whether a caller's trace takes a wait span: its span records, or it is a sampled context from another process
 * (a queue entry's), whose trace goes on here.
 */
function recordsOn(caller: Context): boolean {
  const span = trace.getSpan(caller);
  if (span === undefined) return false;
  if (span.isRecording()) return true;
  const spanContext: SpanContext = span.spanContext();
  return spanContext.isRemote === true && (spanContext.traceFlags & TraceFlags.SAMPLED) !== 0;
}

function endBatch(span: Span, { outcome, failed, executionMs }: BatchOutcome): void {
  if (span.isRecording()) {
    span.setAttribute(BatchAttributes.OUTCOME, outcome);
    span.setAttribute(BatchAttributes.FAILED, failed);
    span.setAttribute(BatchAttributes.EXECUTION_MS, executionMs);
    if (outcome === 'error') span.setStatus({ code: SpanStatusCode.ERROR, message: 'The batch handler failed' });
  }
  span.end();
}
