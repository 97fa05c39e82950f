// The mixed-length workload of `pnpm bench:generation` (`--scenario mixed`): continuous (iteration-level) vs
// request-level scheduling at each concurrency, and both against the decode limit (the ONNX session alone, full
// batches at the workload's mean context), measured in one run, rounds interleaved.
//
// Closed loop: `c` clients each send their next request as soon as their previous one is answered; half of them
// stream (time to first token), half wait for the whole completion (latency per max_tokens class).
import { createBatcher, createStreamingBatcher } from '@microbatch/core';
import { createWorkerPool } from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TextGenerationRunnerSpec,
  WorkerPool,
} from '@microbatch/inference';
import { waitForQuiet } from '../lib/machine.js';
import type { ChartPoint } from './chart.js';
import { decodeLimiter } from './decode-limit.js';
import type { DecodeLimit, SpreadLimit } from './decode-limit.js';
import { median, round, summarize } from './summary.js';
import type { RunResult, Sample } from './summary.js';
import { mixedWorkload } from './workload.js';

/** The most sequences per model call in both schedulings. */
export const MAX_BATCH = 64;
const SCHEDULINGS = ['continuous', 'request'] as const;
export type Scheduling = (typeof SCHEDULINGS)[number];
type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

/** What one model's mixed runs take. */
export interface MixedOptions {
  readonly model: string;
  readonly concurrencies: readonly number[];
  readonly rounds: number;
  /** Requests per client in each run. */
  readonly requestsPerClient: number;
  /** The fewest requests of a run, whatever the concurrency. */
  readonly minRequests: number;
  /** Request-level scheduling too (its batches run to their longest request: slow on large models). */
  readonly request: boolean;
  /** Each timed loop of the decode limit stops after this long (see decodeLimiter). */
  readonly limitBudgetMs?: number;
  /** Runner options of the continuous pool on top of the defaults. */
  readonly continuousRunner?: Partial<TextGenerationRunnerSpec>;
  /**
   * A second continuous pool with these runner options, run in every round after the first: the loop as it was
   * before an option existed (e.g. no step budget, no prefix cache), so its tokens/s is compared in the same run.
   */
  readonly asBefore?: Partial<TextGenerationRunnerSpec>;
}

/** What {@link runMixed} returns: results by concurrency, the chart's points and the console table's rows. */
export interface MixedResults {
  readonly results: Record<string, unknown>;
  readonly chart: ChartPoint[];
  readonly table: Record<string, Record<string, number | string>>;
}

function batchers(pool: Pool, scheduling: Scheduling) {
  const options =
    scheduling === 'continuous'
      ? { ...pool.batcherOptions, batchWaitTimeoutMs: 0, maxQueueSize: 10_000 }
      : { ...pool.batcherOptions, maxBatchSize: MAX_BATCH, batchWaitTimeoutMs: 5, maxQueueSize: 10_000 };
  return {
    generate: createBatcher(pool.handler, options),
    streamer: createStreamingBatcher(pool.streamingHandler, options),
  };
}

/**
 * Runs `c` clients over the workload until every request of it has been answered; throughput is all completion
 * tokens over the whole run (as vLLM's benchmark_serving counts). The workload has 8 requests per client; the drain
 * at the end, with fewer and fewer clients, is not small (the longest generations are 128 tokens), so continuous
 * runs also report the rate while every client was busy.
 */
export async function closedLoop(
  pool: Pool,
  scheduling: Scheduling,
  concurrency: number,
  workload: readonly TextGenerationInput[],
): Promise<RunResult> {
  const { generate, streamer } = batchers(pool, scheduling);
  const before = (await pool.runnerStats())[0];
  let allTokens = 0;
  const samples: Sample[] = [];
  let next = 0;
  let steady: Promise<{ tokensPerSecond: number; rowsPerStep: number }> | undefined;
  const started = performance.now();
  // The worker's counters when the first client finds no more work: from then on the run drains.
  const steadyRate = async () => {
    const stats = (await pool.runnerStats())[0] ?? {};
    const delta = (key: string) => (stats[key] ?? 0) - (before?.[key] ?? 0);
    return {
      tokensPerSecond: (delta('generatedTokens') * 1000) / (performance.now() - started),
      rowsPerStep: delta('decodedRows') / delta('decodeSteps'),
    };
  };
  const client = async (index: number) => {
    const streamed = index % 2 === 0;
    while (next < workload.length) {
      const input = workload[next++] as TextGenerationInput;
      const sent = performance.now();
      let ttft: number | undefined;
      let usage: TextGenerationOutput['usage'] | null = null;
      if (streamed) {
        for await (const chunk of streamer.stream(input)) {
          if (ttft === undefined && (chunk.text.length > 0 || chunk.finish_reason !== null))
            ttft = performance.now() - sent;
          usage = chunk.usage ?? usage;
        }
      } else {
        usage = (await generate(input)).usage;
      }
      const tokens = usage?.completion_tokens ?? 0;
      allTokens += tokens;
      samples.push({
        maxTokens: input.max_new_tokens as number,
        streamed,
        latencyMs: performance.now() - sent,
        ttftMs: ttft,
        tokens,
        promptTokens: usage?.prompt_tokens ?? 0,
      });
    }
    if (scheduling === 'continuous') steady ??= steadyRate();
  };
  await Promise.all(Array.from({ length: concurrency }, (_, index) => client(index)));
  const wallMs = performance.now() - started;
  await Promise.all([generate.close(), streamer.close()]);
  const after = (await pool.runnerStats())[0];
  const delta = Object.fromEntries(
    Object.keys(after ?? {}).map((key) => [key, (after?.[key] ?? 0) - (before?.[key] ?? 0)]),
  );
  const tokens = samples.reduce((sum, sample) => sum + sample.tokens, 0);
  return {
    tokensPerSecond: (tokens * 1000) / wallMs,
    steadyTokensPerSecond: (await steady)?.tokensPerSecond,
    steadyRowsPerStep: (await steady)?.rowsPerStep,
    workerCpuMsPerToken: (delta.threadCpuMs ?? 0) / allTokens,
    wallMs,
    samples,
    steps: scheduling === 'continuous' ? delta : undefined,
  };
}

/** Runs the mixed workload on one model: pools, warm-up, interleaved rounds per concurrency, summaries. */
export async function runMixed(options: MixedOptions): Promise<MixedResults> {
  const { model } = options;
  const schedulings: Scheduling[] = options.request ? ['continuous', 'request'] : ['continuous'];
  const pools: Partial<Record<Scheduling, Pool>> = {
    continuous: createWorkerPool({
      runner: {
        task: 'text-generation',
        model,
        scheduling: 'continuous',
        maxSequences: MAX_BATCH,
        ...options.continuousRunner,
      },
    }),
  };
  if (options.request) {
    pools.request = createWorkerPool({ runner: { task: 'text-generation', model, scheduling: 'request' } });
  }
  const poolOf = (scheduling: Scheduling) => pools[scheduling] as Pool;
  const before =
    options.asBefore === undefined
      ? undefined
      : createWorkerPool({
          runner: {
            task: 'text-generation',
            model,
            scheduling: 'continuous',
            maxSequences: MAX_BATCH,
            ...options.asBefore,
          },
        });
  try {
    await Promise.all([...Object.values(pools), ...(before === undefined ? [] : [before])].map((pool) => pool.ready));
    if (before !== undefined) await closedLoop(before, 'continuous', 8, mixedWorkload(16, 99));
    const limiter = await decodeLimiter(model, options.limitBudgetMs);
    const warm = mixedWorkload(16, 99);
    for (const scheduling of schedulings) await closedLoop(poolOf(scheduling), scheduling, 8, warm);
    const results: Record<string, unknown> = {};
    const chart: ChartPoint[] = [];
    const table: Record<string, Record<string, number | string>> = {};
    for (const concurrency of options.concurrencies) {
      const workload = mixedWorkload(Math.max(options.minRequests, concurrency * options.requestsPerClient));
      const runs: Record<Scheduling, RunResult[]> = { continuous: [], request: [] };
      const beforeRuns: RunResult[] = [];
      const limits: DecodeLimit[] = [];
      const batch = Math.min(concurrency, MAX_BATCH);
      let meanContext = 0;
      let promptTokens = 0;
      let tokens = 0;
      // Interleaved: each round runs continuous, request, then the decode limit, so load on the machine hits all alike.
      for (let trial = 0; trial < options.rounds; trial += 1) {
        // Start each round when nobody else keeps the 2 cores busy, if that happens within 20 s.
        await waitForQuiet(20_000);
        for (const scheduling of schedulings) {
          process.stdout.write(`\rc=${concurrency} round ${trial + 1}/${options.rounds} ${scheduling}      `);
          runs[scheduling].push(await closedLoop(poolOf(scheduling), scheduling, concurrency, workload));
        }
        if (before !== undefined) {
          process.stdout.write(`\rc=${concurrency} round ${trial + 1}/${options.rounds} as before      `);
          beforeRuns.push(await closedLoop(before, 'continuous', concurrency, workload));
        }
        // The workload's mean context: the past a decode step attends to, averaged over every decoded row.
        const samples = runs.continuous.flatMap((run) => run.samples);
        tokens = samples.reduce((sum, sample) => sum + sample.tokens, 0);
        const steps = runs.continuous.map((run) => run.steps ?? {});
        const attended = steps.reduce((sum, step) => sum + (step.attendedReal ?? 0), 0);
        const rows = steps.reduce((sum, step) => sum + (step.decodedRows ?? 0), 0);
        meanContext = Math.max(1, Math.round(attended / rows) - 1);
        promptTokens = samples.reduce((sum, sample) => sum + sample.promptTokens, 0);
        const meanPrompt = Math.max(1, Math.round(promptTokens / samples.length));
        // Every decode step's KV length of every request (its prompt, then one more per token after the first).
        const lengths = samples.flatMap((sample) =>
          Array.from({ length: Math.max(0, sample.tokens - 1) }, (_, k) => sample.promptTokens + k),
        );
        limits.push(await limiter(batch, meanContext, 200, meanPrompt, lengths));
      }
      const stepMs = median(limits.map((l) => l.stepMs));
      const prefillMsPerToken = median(limits.map((l) => l.prefillMsPerToken));
      // The same hardware bound with the workload's prompts prefilled too (full batches, no scheduling or JS):
      // completion tokens over (decode time + prefill time).
      const decodeMsPerToken = stepMs / batch;
      const promptPerCompletion = promptTokens / tokens;
      const spread = (pick: (limit: SpreadLimit) => number) =>
        median(limits.map((l) => (l.spread === undefined ? Number.NaN : pick(l.spread))));
      // The decode limit for rows of the workload's own lengths: the limit slowed by what the spread costs.
      const spreadTokensPerSecond = median(limits.map((l) => l.tokensPerSecond)) / spread((l) => l.costOverEven);
      const limit = {
        batch,
        past: meanContext,
        step_ms: round(stepMs, 3),
        tokens_per_s: round(median(limits.map((l) => l.tokensPerSecond)), 0),
        // The same full batches run as 1, 2 or 4 equal calls, whichever was fastest in each round.
        best_split_tokens_per_s: round(median(limits.map((l) => l.bestSplit.tokensPerSecond)), 0),
        best_split_calls: median(limits.map((l) => l.bestSplit.calls)),
        prefill_ms_per_token: round(prefillMsPerToken, 4),
        cpu_ms_per_token: round(median(limits.map((l) => l.cpuMsPerToken)), 4),
        with_prefill_tokens_per_s: round(1000 / (decodeMsPerToken + promptPerCompletion * prefillMsPerToken), 0),
        // The same bound for rows of the workload's own lengths, split into length groups as the loop splits them.
        spread_tokens_per_s: round(spreadTokensPerSecond, 0),
        spread_cost_over_even: round(
          spread((l) => l.costOverEven),
          2,
        ),
        spread_calls_per_step: round(
          spread((l) => l.callsPerStep),
          2,
        ),
        spread_padding_overhead: round(
          spread((l) => l.paddingOverhead),
          2,
        ),
        spread_with_prefill_tokens_per_s: round(
          1000 / (1000 / spreadTokensPerSecond + promptPerCompletion * prefillMsPerToken),
          0,
        ),
      };
      const continuous = summarize(runs.continuous);
      const request = options.request ? summarize(runs.request) : undefined;
      // Without request-level runs (`request: false`), their figures and ratios are NaN (null in the JSON).
      type Summary = Record<string, unknown> | undefined;
      const tps = (summary: Summary) => (summary?.tokens_per_s as number | undefined) ?? Number.NaN;
      const p50 = (summary: Summary, max: number) =>
        (summary?.latency_by_max_tokens as Record<number, { p50_ms: number }> | undefined)?.[max]?.p50_ms ?? Number.NaN;
      const ttft = (summary: Summary) => (summary?.ttft as { p50_ms: number } | undefined)?.p50_ms ?? Number.NaN;
      const cpuPerToken = (summary: Summary) => (summary?.worker_cpu_ms_per_token as number | undefined) ?? Number.NaN;
      const ratios = {
        tokens_per_s_continuous_over_request: round(tps(continuous) / tps(request), 2),
        p50_8_tokens_continuous_over_request: round(p50(continuous, 8) / p50(request, 8), 2),
        ttft_p50_continuous_over_request: round(ttft(continuous) / ttft(request), 2),
        tokens_per_s_continuous_over_decode_limit: round(tps(continuous) / limit.tokens_per_s, 2),
        tokens_per_s_continuous_over_best_split_limit: round(tps(continuous) / limit.best_split_tokens_per_s, 2),
        // While every client was busy (no drain), the same ratio.
        steady_tokens_per_s_continuous_over_decode_limit: round(
          (continuous.steady_tokens_per_s as number) / limit.tokens_per_s,
          2,
        ),
        tokens_per_s_continuous_over_limit_with_prefill: round(tps(continuous) / limit.with_prefill_tokens_per_s, 2),
        // The bound for rows of this length spread batched in rectangular calls, incl. prefill, over the decode limit.
        spread_limit_with_prefill_over_decode_limit: round(
          limit.spread_with_prefill_tokens_per_s / limit.tokens_per_s,
          2,
        ),
        tokens_per_s_continuous_over_spread_limit_with_prefill: round(
          tps(continuous) / limit.spread_with_prefill_tokens_per_s,
          2,
        ),
        // Load-independent: tokens per second of worker CPU (busy-machine waits excluded), continuous over the limit.
        cpu_efficiency_continuous_over_decode_limit: round(limit.cpu_ms_per_token / cpuPerToken(continuous), 2),
        cpu_efficiency_continuous_over_request: round(cpuPerToken(request) / cpuPerToken(continuous), 2),
      };
      chart.push({
        concurrency,
        continuous: tps(continuous),
        request: tps(request),
        decodeLimit: limit.tokens_per_s,
        limitWithPrefill: limit.with_prefill_tokens_per_s,
        ttftContinuous: ttft(continuous),
        ttftRequest: ttft(request),
      });
      const asBefore = before === undefined ? undefined : summarize(beforeRuns);
      results[`c${concurrency}`] = {
        concurrency,
        requests: workload.length,
        continuous,
        request,
        ...(asBefore === undefined
          ? {}
          : {
              continuous_as_before: { runner: options.asBefore, ...asBefore },
              tokens_per_s_continuous_over_as_before: round(tps(continuous) / tps(asBefore), 2),
            }),
        decode_limit: limit,
        ratios,
      };
      table[`c=${concurrency}`] = {
        'continuous tok/s': tps(continuous),
        ...(asBefore === undefined
          ? {}
          : { 'as before tok/s': tps(asBefore), 'cont/before': round(tps(continuous) / tps(asBefore), 2) }),
        'request tok/s': tps(request),
        'limit tok/s': limit.tokens_per_s,
        'cont/req': ratios.tokens_per_s_continuous_over_request,
        'cont/limit': ratios.tokens_per_s_continuous_over_decode_limit,
        'cont/limit split': ratios.tokens_per_s_continuous_over_best_split_limit,
        'steady cont/limit': ratios.steady_tokens_per_s_continuous_over_decode_limit,
        'limit+prefill tok/s': limit.with_prefill_tokens_per_s,
        'cont/(limit+prefill)': ratios.tokens_per_s_continuous_over_limit_with_prefill,
        'spread+prefill/limit': ratios.spread_limit_with_prefill_over_decode_limit,
        'cont/(spread+prefill)': ratios.tokens_per_s_continuous_over_spread_limit_with_prefill,
        'CPU eff. c/limit': ratios.cpu_efficiency_continuous_over_decode_limit,
        'CPU eff. c/r': ratios.cpu_efficiency_continuous_over_request,
        '8-tok p50 c/r': ratios.p50_8_tokens_continuous_over_request,
        'TTFT p50 c/r': ratios.ttft_p50_continuous_over_request,
      };
    }
    process.stdout.write('\n');
    return { results, chart, table };
  } finally {
    await Promise.all([...Object.values(pools), ...(before === undefined ? [] : [before])].map((pool) => pool.close()));
  }
}
