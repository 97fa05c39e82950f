import { isBatchError } from '@microbatch/core';
import { fail, isObjectLike } from '@microbatch/core/util';
import { Counter, Gauge, Histogram, register } from 'prom-client';
import { type AnyRegistry, checkRegistry } from './options.js';
import { reasonLabel } from './reasons.js';

/** Options of {@link createGenerationMetrics}. */
export interface GenerationMetricsOptions {
  /** The model's id: the `model_name` label of every series. */
  readonly model: string;
  /**
   * Where the metrics are registered.
   * @default prom-client's global `register`
   */
  readonly registry?: AnyRegistry;
}

/** Token counts of a finished sequence, as OpenAI's `usage` reports them. */
export interface SequenceUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
}

/** One generated sequence (one prompt of a request), followed from its arrival: see {@link GenerationMetrics.start}. */
export interface SequenceTimer {
  /** It left the queue: its batch was dispatched to the model. */
  dispatched(): void;
  /** A piece of its output was produced (streamed requests): the first one is its first token. */
  token(): void;
  /** It finished with these token counts. */
  finished(usage: SequenceUsage): void;
  /** It failed or was refused; a refusal before it reached the model is counted by `cause`. */
  failed(error: unknown): void;
}

/** What {@link createGenerationMetrics} returns. */
export interface GenerationMetrics {
  /** Starts following a sequence now (when its request arrived). */
  start(): SequenceTimer;
  /** Removes the metrics from the registry. */
  unregister(): void;
}

/** Each metric's name: the OpenTelemetry GenAI names where one exists, vLLM's (with `microbatch_`) otherwise. */
export const GENERATION_METRIC_NAMES = Object.freeze({
  timeToFirstToken: 'gen_ai_server_time_to_first_token_seconds',
  timePerOutputToken: 'gen_ai_server_time_per_output_token_seconds',
  requestDuration: 'gen_ai_server_request_duration_seconds',
  queueTime: 'microbatch_request_queue_time_seconds',
  prefillTime: 'microbatch_request_prefill_time_seconds',
  decodeTime: 'microbatch_request_decode_time_seconds',
  promptTokens: 'microbatch_prompt_tokens_total',
  generationTokens: 'microbatch_generation_tokens_total',
  running: 'microbatch_num_requests_running',
  waiting: 'microbatch_num_requests_waiting',
  refusals: 'microbatch_request_refusals_total',
});

const LATENCY_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];
const TOKEN_LATENCY_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5,
];

/** Codes that mean the sequence never reached the model: refusals, counted by cause. */
const REFUSALS = new Set(['QUEUE_FULL', 'OVERLOADED', 'DEADLINE_EXCEEDED', 'CLOSED', 'UNAVAILABLE', 'ITEM_TOO_LARGE']);

/**
 * Per-sequence generation metrics, the ones vLLM users read: time to first token, time per output token, end-to-end
 * latency, queue, prefill and decode time (histograms in seconds), prompt and generated token counters, running and
 * waiting sequences (gauges), and refusals by `cause`; every series labelled `model_name`. A serving endpoint calls
 * `start()` when a request's prompt arrives and reports its dispatch, tokens and end; time to first token, time per
 * output token, prefill and decode time are observed for streamed requests (a non-streamed one has no first-token
 * moment to see).
 *
 * @example
 * ```ts
 * const generation = createGenerationMetrics({ model: 'tinystories', registry });
 * const timer = generation.start();
 * timer.dispatched();
 * timer.token();
 * timer.finished({ prompt_tokens: 5, completion_tokens: 16 });
 * ```
 */
export function createGenerationMetrics(options: GenerationMetricsOptions): GenerationMetrics {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const { model } = options;
  if (typeof model !== 'string' || model.length === 0) fail('model', 'a non-empty string', model);
  const registry = options.registry === undefined ? register : checkRegistry('registry', options.registry);
  const names = GENERATION_METRIC_NAMES;
  for (const name of Object.values(names)) {
    if (registry.getSingleMetric(name) !== undefined)
      throw new Error(`The registry already has a metric named "${name}"; use one registry per model server`);
  }
  const registers = [registry];
  const labelNames = ['model_name'] as const;
  const labels = { model_name: model };
  const histogram = (name: string, help: string, buckets: number[]) =>
    new Histogram({ name, help, labelNames, buckets, registers });
  const m = {
    ttft: histogram(names.timeToFirstToken, 'Seconds from a streamed request to its first token.', LATENCY_BUCKETS),
    tpot: histogram(
      names.timePerOutputToken,
      'Seconds per output token after the first, per streamed sequence.',
      TOKEN_LATENCY_BUCKETS,
    ),
    e2e: histogram(names.requestDuration, 'Seconds from a request to its last token (end to end).', LATENCY_BUCKETS),
    queue: histogram(names.queueTime, 'Seconds a sequence waited before its batch reached the model.', LATENCY_BUCKETS),
    prefill: histogram(names.prefillTime, 'Seconds from dispatch to the first token (streamed).', LATENCY_BUCKETS),
    decode: histogram(names.decodeTime, 'Seconds from the first token to the last (streamed).', LATENCY_BUCKETS),
    promptTokens: new Counter({ name: names.promptTokens, help: 'Prompt tokens processed.', labelNames, registers }),
    generationTokens: new Counter({
      name: names.generationTokens,
      help: 'Tokens generated.',
      labelNames,
      registers,
    }),
    running: new Gauge({ name: names.running, help: 'Sequences at the model now.', labelNames, registers }),
    waiting: new Gauge({ name: names.waiting, help: 'Sequences waiting for the model now.', labelNames, registers }),
    refusals: new Counter({
      name: names.refusals,
      help: 'Sequences refused before reaching the model, by cause (queue_full, overloaded, deadline, closed, ...).',
      labelNames: ['model_name', 'cause'] as const,
      registers,
    }),
  };
  // Series start at 0, so `rate()` and absence alerts work from the start.
  for (const metric of [m.ttft, m.tpot, m.e2e, m.queue, m.prefill, m.decode]) metric.zero(labels);
  m.promptTokens.inc(labels, 0);
  m.generationTokens.inc(labels, 0);
  m.running.set(labels, 0);
  m.waiting.set(labels, 0);
  for (const cause of ['queue_full', 'overloaded', 'deadline', 'closed']) m.refusals.inc({ ...labels, cause }, 0);

  return {
    start(): SequenceTimer {
      const arrivedAt = performance.now();
      let dispatchedAt: number | undefined;
      let firstAt: number | undefined;
      let tokens = 0;
      let done = false;
      m.waiting.inc(labels);
      const leave = (): void => {
        done = true;
        if (dispatchedAt === undefined) m.waiting.dec(labels);
        else m.running.dec(labels);
      };
      return {
        dispatched() {
          if (done || dispatchedAt !== undefined) return;
          dispatchedAt = performance.now();
          m.waiting.dec(labels);
          m.running.inc(labels);
          m.queue.observe(labels, (dispatchedAt - arrivedAt) / 1000);
        },
        token() {
          if (done) return;
          tokens += 1;
          if (firstAt !== undefined) return;
          firstAt = performance.now();
          m.ttft.observe(labels, (firstAt - arrivedAt) / 1000);
          if (dispatchedAt !== undefined) m.prefill.observe(labels, (firstAt - dispatchedAt) / 1000);
        },
        finished(usage) {
          if (done) return;
          const now = performance.now();
          leave();
          m.e2e.observe(labels, (now - arrivedAt) / 1000);
          m.promptTokens.inc(labels, usage.prompt_tokens);
          m.generationTokens.inc(labels, usage.completion_tokens);
          if (firstAt === undefined) return;
          m.decode.observe(labels, (now - firstAt) / 1000);
          const after = usage.completion_tokens - 1;
          if (after > 0 && tokens > 1) m.tpot.observe(labels, (now - firstAt) / 1000 / after);
        },
        failed(error) {
          if (done) return;
          const refused = dispatchedAt === undefined && isBatchError(error) && REFUSALS.has(error.code);
          leave();
          if (refused) m.refusals.inc({ ...labels, cause: reasonLabel(error.code) });
        },
      };
    },
    unregister() {
      for (const name of Object.values(names)) registry.removeSingleMetric(name);
    },
  };
}
