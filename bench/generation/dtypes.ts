// `pnpm bench:generation --dtype q4,q8,fp32`: the same decoder (the ~100M Llama-shaped bench model unless `--model`)
// in each weight format, through the continuous decode loop: tokens/s and time to first token at concurrency 1 and
// 32, and the process's resident memory. Each dtype runs in a child process of its own (one pool, one worker,
// nothing else loaded), so its RSS is its own; the dtypes run one after the other in the same run, so they share the
// machine's conditions. Greedy, no prefix cache (the prompts share words), the same prompts for every dtype.
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createStreamingBatcher } from '@microbatch/core';
import { MODEL_DTYPE_SUFFIXES, createWorkerPool } from '@microbatch/inference';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput, WorkerPool } from '@microbatch/inference';
import { quantile, storyWords, streamOne } from './streams.js';

/** What one dtype's child measures. */
export interface DtypePlan {
  /** Concurrency levels, each its clients streaming `requestsPerClient` requests one after the other. */
  readonly concurrencies: readonly number[];
  /** Requests per client at concurrency 1 (at higher concurrency: 1 each). */
  readonly requestsAtOne: number;
  readonly maxNewTokens: number;
  /** Prompt length in words of the story (about 0.78 tokens a word). */
  readonly promptWords: number;
}

/** One concurrency level's figures. */
export interface ConcurrencyResult {
  readonly requests: number;
  readonly completion_tokens: number;
  readonly wall_s: number;
  /** Generated tokens over the wall time of the level (every client's requests). */
  readonly tokens_per_s: number;
  readonly ttft_p50_ms: number;
  readonly ttft_p90_ms: number;
}

export interface DtypeResult {
  readonly dtype: string;
  readonly file: string;
  readonly file_mib: number;
  readonly load_s: number;
  /** Resident memory of the child once the model is loaded and one request ran (MiB). */
  readonly rss_loaded_mib: number;
  /** The largest resident memory sampled (every 50 ms) while the levels ran (MiB). */
  readonly rss_peak_mib: number;
  readonly by_concurrency: Readonly<Record<string, ConcurrencyResult>>;
}

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

function rssMiB(): number {
  try {
    return (Number(readFileSync('/proc/self/statm', 'utf8').split(' ')[1]) * 4096) / 2 ** 20;
  } catch {
    return process.memoryUsage().rss / 2 ** 20;
  }
}

/** Measures one dtype of `dir` in a child process of its own. */
export function measureDtypeInChild(dir: string, dtype: string, plan: DtypePlan): Promise<DtypeResult> {
  const script = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...process.execArgv, script, '--child', dir, dtype, JSON.stringify(plan)],
      { timeout: 900_000, maxBuffer: 16 * 2 ** 20 },
      (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`${dtype}: ${error.message}\n${stderr.slice(-2000)}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop() as string) as DtypeResult);
      },
    );
  });
}

async function runLevel(
  streamer: ReturnType<typeof createStreamingBatcher<TextGenerationInput, TextGenerationChunk>>,
  clients: number,
  perClient: number,
  plan: DtypePlan,
): Promise<ConcurrencyResult> {
  const ttfts: number[] = [];
  let tokens = 0;
  let requests = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      for (let index = 0; index < perClient; index += 1) {
        const input = {
          prompt: storyWords(plan.promptWords, (client * 7 + index * 3) % 97),
          max_new_tokens: plan.maxNewTokens,
          temperature: 0,
        };
        const streamed = await streamOne(streamer, input);
        ttfts.push(streamed.ttftMs);
        tokens += streamed.completionTokens;
        requests += 1;
      }
    }),
  );
  const wallS = (performance.now() - started) / 1000;
  return {
    requests,
    completion_tokens: tokens,
    wall_s: round(wallS, 2),
    tokens_per_s: round(tokens / wallS),
    ttft_p50_ms: round(quantile(ttfts, 0.5)),
    ttft_p90_ms: round(quantile(ttfts, 0.9)),
  };
}

async function child(dir: string, dtype: string, plan: DtypePlan): Promise<DtypeResult> {
  const began = performance.now();
  const pool: Pool = createWorkerPool({
    runner: {
      task: 'text-generation',
      model: dir,
      dtype: dtype as keyof typeof MODEL_DTYPE_SUFFIXES,
      scheduling: 'continuous',
      maxSequences: Math.max(...plan.concurrencies),
      prefixCacheMb: 0,
    },
    size: 1,
  });
  try {
    await pool.ready;
    const loadS = (performance.now() - began) / 1000;
    const streamer = createStreamingBatcher(pool.streamingHandler, {
      ...pool.batcherOptions,
      batchWaitTimeoutMs: 0,
      maxQueueSize: 10_000,
    });
    // One request first: the session's first runs allocate what later ones reuse.
    await runLevel(streamer, 1, 1, plan);
    const loaded = rssMiB();
    let peak = loaded;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMiB());
    }, 50);
    const byConcurrency: Record<string, ConcurrencyResult> = {};
    for (const clients of plan.concurrencies) {
      byConcurrency[`c${clients}`] = await runLevel(streamer, clients, clients === 1 ? plan.requestsAtOne : 1, plan);
    }
    clearInterval(sampler);
    await streamer.close();
    const file = join('onnx', `model${MODEL_DTYPE_SUFFIXES[dtype as keyof typeof MODEL_DTYPE_SUFFIXES]}.onnx`);
    return {
      dtype,
      file,
      file_mib: round(statSync(join(dir, file)).size / 2 ** 20),
      load_s: round(loadS, 2),
      rss_loaded_mib: round(loaded),
      rss_peak_mib: round(Math.max(peak, rssMiB())),
      by_concurrency: byConcurrency,
    };
  } finally {
    await pool.close();
  }
}

if (process.argv[2] === '--child') {
  const [dir, dtype, plan] = process.argv.slice(3) as [string, string, string];
  process.stdout.write(`${JSON.stringify(await child(dir, dtype, JSON.parse(plan) as DtypePlan))}\n`);
}
