// A request's generation on its own trace: the active span of the request (from the app's HTTP instrumentation)
// gets an event when each prompt reaches the model and at its first token, and the token counts as attributes.
import { type Span, trace } from '@opentelemetry/api';
import type { SequenceTimer, SequenceUsage } from '@microbatch/prometheus';

/** A timer that does nothing: where metrics are off but the request is traced. */
const NO_TIMER: SequenceTimer = {
  dispatched: () => undefined,
  token: () => undefined,
  finished: () => undefined,
  failed: () => undefined,
};

/**
 * The request's timers, reporting also to the request's active span where it records: `microbatch.dispatched`
 * (queue time), `gen_ai.first_token` (time to first token, streamed) and, once every prompt is done,
 * `gen_ai.usage.input_tokens` / `gen_ai.usage.output_tokens`, `gen_ai.request.model` and `gen_ai.operation.name`.
 * Returns `timers` as they are when no span records.
 */
export function traceSequences(
  model: string,
  count: number,
  timers: readonly SequenceTimer[] | undefined,
): readonly SequenceTimer[] | undefined {
  const span = trace.getActiveSpan();
  if (span?.isRecording() !== true) return timers;
  span.setAttributes({ 'gen_ai.operation.name': 'text_completion', 'gen_ai.request.model': model });
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
  let first = true;
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
      span.addEvent('microbatch.dispatched', { index, 'microbatch.queue_time_ms': performance.now() - startedAt });
    },
    token() {
      timer.token();
      if (!first) return;
      first = false;
      span.addEvent('gen_ai.first_token', {
        index,
        'gen_ai.server.time_to_first_token': (performance.now() - startedAt) / 1000,
      });
    },
    finished(counts: SequenceUsage) {
      timer.finished(counts);
      if (!open) return;
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
