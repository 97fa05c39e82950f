// What one scheduling measured in the rounds of one concurrency of `pnpm bench:generation`, reduced to the figures
// its results and BENCHMARKS.md section report (medians of rounds; an iteration of the continuous loop split by
// where its time went).
import { MAX_TOKENS_CLASSES } from './workload.js';

export interface Sample {
  readonly maxTokens: number;
  readonly streamed: boolean;
  readonly latencyMs: number;
  readonly ttftMs: number | undefined;
  readonly tokens: number;
  readonly promptTokens: number;
}

export interface RunResult {
  readonly tokensPerSecond: number;
  /**
   * Continuous only: tokens the worker generated per second while every client was busy (from the start until the
   * workload ran out), without the drain at the end when fewer and fewer clients are left.
   */
  readonly steadyTokensPerSecond: number | undefined;
  /** Continuous only: decoded rows per decode step over the same window. */
  readonly steadyRowsPerStep: number | undefined;
  /** CPU time of the worker thread per completion token (every token generated in the run, drained ones too). */
  readonly workerCpuMsPerToken: number;
  readonly wallMs: number;
  readonly samples: Sample[];
  readonly steps: Readonly<Record<string, number>> | undefined;
}

const quantile = (values: readonly number[], q: number): number => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
};
export const median = (values: readonly number[]): number => quantile(values, 0.5);
export const round = (value: number, digits = 1): number => Number(value.toFixed(digits));

export function summarize(runs: readonly RunResult[]) {
  const samples = runs.flatMap((run) => run.samples);
  const latency = Object.fromEntries(
    MAX_TOKENS_CLASSES.map((max) => {
      const values = samples
        .filter((sample) => sample.maxTokens === max && !sample.streamed)
        .map((sample) => sample.latencyMs);
      return [max, { p50_ms: round(median(values)), p99_ms: round(quantile(values, 0.99)), n: values.length }];
    }),
  );
  const ttfts = samples.filter((sample) => sample.ttftMs !== undefined).map((sample) => sample.ttftMs as number);
  const completion = samples.reduce((sum, sample) => sum + sample.tokens, 0);
  const summary: Record<string, unknown> = {
    tokens_per_s: round(median(runs.map((run) => run.tokensPerSecond)), 0),
    ...(runs[0]?.steadyTokensPerSecond === undefined
      ? {}
      : { steady_tokens_per_s: round(median(runs.map((run) => run.steadyTokensPerSecond ?? 0)), 0) }),
    worker_cpu_ms_per_token: round(median(runs.map((run) => run.workerCpuMsPerToken)), 4),
    prompt_tokens_per_completion_token: round(
      samples.reduce((sum, sample) => sum + sample.promptTokens, 0) / completion,
      2,
    ),
    latency_by_max_tokens: latency,
    ttft: { p50_ms: round(median(ttfts)), p99_ms: round(quantile(ttfts, 0.99)), n: ttfts.length },
  };
  const stepRuns = runs
    .map((run) => run.steps)
    .filter((steps): steps is Readonly<Record<string, number>> => steps !== undefined);
  if (stepRuns.length > 0) {
    const total = (key: string) => stepRuns.reduce((sum, steps) => sum + (steps[key] ?? 0), 0);
    const iterations = total('iterations');
    const decodeSteps = total('decodeSteps');
    const loop = total('loopMs');
    const run = total('decodeRunMs') + total('prefillRunMs');
    summary.steps = {
      decode_steps: decodeSteps,
      mean_rows_per_step: round(total('decodedRows') / decodeSteps),
      // Until the workload ran out (the drain's steps, with fewer and fewer rows, left out).
      mean_rows_per_step_all_clients_busy: round(median(runs.map((run) => run.steadyRowsPerStep ?? 0))),
      prefill_calls: total('prefillCalls'),
      joined_running: total('joinedRunning'),
      // Per loop iteration (one prefill call at most, then one decode step):
      iteration_ms: round(loop / iterations, 3),
      session_run_decode_ms: round(total('decodeRunMs') / iterations, 3),
      session_run_prefill_ms: round(total('prefillRunMs') / iterations, 3),
      decode_calls_per_step: round(total('decodeCalls') / decodeSteps, 2),
      mean_waiting: round(total('waitingSum') / iterations, 1),
      mean_attended_real: round(total('attendedReal') / total('decodedRows'), 1),
      padding_overhead: round(total('attendedPadded') / total('attendedReal'), 2),
      kv_compose_ms: round(total('composeMs') / iterations, 3),
      rows_copied_per_iteration: round(total('rowsCopied') / iterations, 2),
      regroups: total('regroups'),
      sample_detokenize_ms: round(total('sampleMs') / iterations, 3),
      answer_stream_ms: round(total('answerMs') / iterations, 3),
      other_js_ms: round((loop - run - total('composeMs') - total('sampleMs') - total('answerMs')) / iterations, 3),
      session_run_share: round(run / loop, 3),
    };
  }
  return summary;
}
