// Memory after long prompts (issue 12): onnxruntime's CPU arena keeps the peak of every shape it has served, so a
// burst of long prompts would leave the worker holding their prefill memory for good. The continuous runner turns
// the arena off; this checks whether the process's resident memory returns near its baseline once such a burst is
// over. Each measurement runs in a child process of its own (one continuous pool, nothing else), once with the C
// library's defaults and once with glibc's mmap threshold fixed (`MALLOC_MMAP_THRESHOLD_`): by default glibc
// raises that threshold after freeing a large block, and later large blocks (tensors, array buffers) then come
// from heaps it does not give back.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createWorkerPool } from '@microbatch/inference';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput, WorkerPool } from '@microbatch/inference';

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

const STORY_WORDS = (
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ' +
  'One day, Lily saw a big red ball under a tree. She wanted to play with it, but it was too high. '
).split(' ');

/** A prompt of about `words` words (about 1.35 tokens a word with the bundled tokenizer). */
function prompt(words: number): string {
  return Array.from({ length: words }, (_, index) => STORY_WORDS[index % STORY_WORDS.length]).join(' ');
}

/** Resident memory of the process, in MiB (Linux /proc; `process.memoryUsage()` elsewhere). */
function rssMiB(): number {
  try {
    const pages = Number(readFileSync('/proc/self/statm', 'utf8').split(' ')[1]);
    return (pages * 4096) / 2 ** 20;
  } catch {
    return process.memoryUsage().rss / 2 ** 20;
  }
}

export interface MemoryResult {
  readonly baseline_mib: number;
  readonly peak_mib: number;
  readonly settled_mib: number;
  /** Settled over baseline, as a share of what the burst added at its peak (0: all returned). */
  readonly retained_share_of_burst: number;
  readonly long_prompt_tokens: number;
  readonly burst_requests: number;
}

const round = (value: number) => Math.round(value * 10) / 10;

/**
 * Baseline RSS (after short traffic), the peak during a burst of long prompts (~480 tokens, max_new_tokens 1) mixed
 * with short ones at concurrency 16, and the RSS once the same short traffic ran again and the worker sat idle.
 */
export async function measureMemoryAfterLongPrompts(pool: Pool): Promise<MemoryResult> {
  const short = Array.from({ length: 32 }, (_, index) => ({
    prompt: prompt(6 + (index % 12)),
    max_new_tokens: 16,
    temperature: 0,
  }));
  const long = { prompt: prompt(740), max_new_tokens: 1, temperature: 0 };
  const burst = Array.from(
    { length: 96 },
    (_, index) => (index % 3 === 2 ? short[index % short.length] : long) as TextGenerationInput,
  );
  const settle = async () => {
    await pool.run(short);
    await new Promise((resolve) => setTimeout(resolve, 500));
  };
  await settle();
  const baseline = rssMiB();
  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMiB());
  }, 20);
  let next = 0;
  let longTokens = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < burst.length) {
        const [result] = (await pool.run([burst[next++] as TextGenerationInput])) as TextGenerationOutput[];
        longTokens = Math.max(longTokens, result?.usage.prompt_tokens ?? 0);
      }
    }),
  );
  clearInterval(sampler);
  peak = Math.max(peak, rssMiB());
  // Settled: the same short traffic again, then 10 s idle (V8's memory reducer collects an idle worker's garbage
  // array buffers after about 8 s).
  await settle();
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  const settled = rssMiB();
  return {
    baseline_mib: round(baseline),
    peak_mib: round(peak),
    settled_mib: round(settled),
    retained_share_of_burst: peak > baseline ? Math.round(((settled - baseline) / (peak - baseline)) * 100) / 100 : 0,
    long_prompt_tokens: longTokens,
    burst_requests: burst.length,
  };
}

/** One measurement in a child process with `env` added to this process's environment. */
export function measureMemoryInChild(model: string, env: Readonly<Record<string, string>> = {}): Promise<MemoryResult> {
  const script = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...process.execArgv, script, '--child', model],
      { env: { ...process.env, ...env }, timeout: 180_000 },
      (error, stdout) => {
        if (error !== null) reject(error);
        else resolve(JSON.parse(stdout.trim().split('\n').pop() as string) as MemoryResult);
      },
    );
  });
}

if (process.argv[2] === '--child') {
  const pool = createWorkerPool({
    runner: { task: 'text-generation', model: process.argv[3] as string, scheduling: 'continuous', maxSequences: 64 },
  });
  await pool.ready;
  const result = await measureMemoryAfterLongPrompts(pool);
  await pool.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
