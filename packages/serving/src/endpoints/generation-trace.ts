// A request's generation on its own trace: the active span of the request (from the app's HTTP instrumentation)
// gets an event when each prompt reaches the model, at its first token (with its prefill time) and at its last
// (with its decode time), and the token counts as attributes.
import { type Span, trace } from '@opentelemetry/api';
import type { SequenceTimer, SequenceUsage } from '@microbatch/prometheus';

/** A timer that does nothing: where metrics are off but the request is traced. */
const NO_TIMER: SequenceTimer = {
  dispatched: () => undefined,
  token: () => undefined,
  finished: () => undefined,
  failed: () => undefined,
};

/** OpenTelemetry's `gen_ai.operation.name` of a generating request. */
export type GenerationOperation = 'text_completion' | 'chat';

/**
 * The request's timers, reporting also to the request's active span where it records: `microbatch.dispatched`
 * (queue time), `gen_ai.first_token` (time to first token, streamed), `microbatch.prefill` (dispatch to first
 * token, streamed), `microbatch.decode` (first token to last, time per output token and tokens, streamed: a whole
 * completion has no first-token time) and, once every prompt is done,
 * `gen_ai.usage.input_tokens` / `gen_ai.usage.output_tokens`, `gen_ai.request.model` and `gen_ai.operation.name`
 * (`operation`).
 * Returns `timers` as they are when no span records.
 */
export function traceSequences(
  model: string,
  operation: GenerationOperation,
  count: number,
  timers: readonly SequenceTimer[] | undefined,
): readonly SequenceTimer[] | undefined {
  const span = trace.getActiveSpan();
  if (span?.isRecording() !== true) return timers;
  span.setAttributes({ 'gen_ai.operation.name': operation, 'gen_ai.request.model': model });
  const usage = { input: 0, output: 0, open: count };
  return Array.from({ length: count }, (_, index) => traced(span, index, timers?.[index] ?? NO_TIMER, usage));
}

function traced(
  span: Span,
  index: number,
  timer: SequenceTimer,
  usage: { input: number; output: number; open: number },
): SequenceTimer {
  const startedAt = performance.now();
  let dispatchedAt: number | undefined;
  let firstAt: number | undefined;
  let open = true;
  const close = (): void => {
    if (!open) return;
    open = false;
    usage.open -= 1;
    if (usage.open === 0)
      span.setAttributes({ 'gen_ai.usage.input_tokens': usage.input, 'gen_ai.usage.output_tokens': usage.output });
  };
  return {
    dispatched() {
      timer.dispatched();
      if (dispatchedAt !== undefined) return;
      dispatchedAt = performance.now();
      span.addEvent('microbatch.dispatched', { index, 'microbatch.queue_time_ms': dispatchedAt - startedAt });
    },
    token() {
      timer.token();
      if (firstAt !== undefined || !open) return;
      firstAt = performance.now();
      span.addEvent('gen_ai.first_token', { index, 'gen_ai.server.time_to_first_token': (firstAt - startedAt) / 1000 });
      if (dispatchedAt !== undefined)
        span.addEvent('microbatch.prefill', {
          index,
          'microbatch.prefill_time_seconds': (firstAt - dispatchedAt) / 1000,
        });
    },
    finished(counts: SequenceUsage) {
      timer.finished(counts);
      if (!open) return;
      if (firstAt !== undefined) {
        const decodeSeconds = (performance.now() - firstAt) / 1000;
        const after = counts.completion_tokens - 1;
        span.addEvent('microbatch.decode', {
          index,
          'microbatch.decode_time_seconds': decodeSeconds,
          'gen_ai.usage.output_tokens': counts.completion_tokens,
          // As the metric: the tokens after the first, over the time they took.
          ...(after > 0 ? { 'gen_ai.server.time_per_output_token': decodeSeconds / after } : {}),
        });
      }
      usage.input += counts.prompt_tokens;
      usage.output += counts.completion_tokens;
      close();
    },
    failed(error: unknown) {
      timer.failed(error);
      close();
    },
  };
}
