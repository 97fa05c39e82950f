// Trace context across processes: a web replica's span for an item that a worker elsewhere runs (its context goes
// into the item's queue entry), and the worker's reading of that context back.
import {
  type Context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type TextMapPropagator,
  type Tracer,
  isSpanContextValid,
  trace,
} from '@opentelemetry/api';
import type { RemoteBatch, SentItem } from '../tracing.js';
import { BatchAttributes } from './attributes.js';

/** What {@link sendItem} needs: the tracer its spans go to, and how a context is written into a carrier. */
export interface SendTarget {
  readonly tracer: Tracer;
  readonly propagator: Pick<TextMapPropagator, 'inject' | 'extract'>;
}

const { BATCHER, BATCH_SIZE, QUEUE_WAIT_MS, REMOTE_BATCH_ID, ITEM_OUTCOME: OUTCOME } = BatchAttributes;

/**
 * The replica's side of one sent item: a `microbatch.queue NAME` client span, a child of the caller's span, from
 * the item's enqueueing to its answer, with a `microbatch.started` event when a worker's batch takes it. The carrier
 * holds this span's context, so the worker's spans for the item are its children, on the caller's trace.
 */
export function sendItem({ tracer, propagator }: SendTarget, caller: Context, batcher: string): SentItem | undefined {
  const parent = trace.getSpan(caller);
  if (parent === undefined || !parent.isRecording()) return undefined;
  const span = tracer.startSpan(
    `microbatch.queue ${batcher}`,
    { kind: SpanKind.CLIENT, attributes: { [BATCHER]: batcher } },
    caller,
  );
  const carrier: Record<string, string> = {};
  propagator.inject(trace.setSpan(caller, span), carrier, {
    set: (target, key, value) => {
      target[key] = value;
    },
  });
  let ended = false;
  return {
    carrier,
    started({ batchId, size, queueWaitMs }: RemoteBatch): void {
      if (ended) return;
      const attributes = { [REMOTE_BATCH_ID]: batchId, [BATCH_SIZE]: size, [QUEUE_WAIT_MS]: queueWaitMs };
      span.setAttributes(attributes);
      span.addEvent('microbatch.started', attributes);
    },
    end(error: unknown): void {
      if (ended) return;
      ended = true;
      const outcome = outcomeOf(error);
      span.setAttribute(OUTCOME, outcome);
      // A caller that left is no failure of the item's; a refusal or a failure is (its code, as the client got it).
      if (outcome !== 'ok' && outcome !== 'cancelled') span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
      span.end();
    },
  };
}

/** `ok`, a `BatchError`'s code, or `cancelled` for anything else (an abort reason), as the batcher counts it. */
function outcomeOf(error: unknown): string {
  if (error === undefined) return 'ok';
  if (!(error instanceof Error) || !('code' in error)) return 'cancelled';
  return typeof error.code === 'string' ? error.code : 'cancelled';
}

/** The remote caller context in a carrier written by {@link sendItem}; `undefined` if it holds none. */
export function extractCaller(
  propagator: Pick<TextMapPropagator, 'extract'>,
  carrier: Readonly<Record<string, string>>,
): Context | undefined {
  if (typeof carrier !== 'object' || carrier === null) return undefined;
  const extracted = propagator.extract(ROOT_CONTEXT, carrier, {
    get: (source, key) => (Object.hasOwn(source, key) ? source[key] : undefined),
    keys: (source) => Object.keys(source),
  });
  const spanContext = trace.getSpanContext(extracted);
  return spanContext !== undefined && isSpanContextValid(spanContext) ? extracted : undefined;
}
