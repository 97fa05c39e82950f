// The BENCHMARKS.md section of `pnpm bench:generation --dtype`: one row per dtype and concurrency, each with its
// ratio to fp32's figure of the same run.
import { writeSection } from '../lib/markdown-section.js';
import type { DtypeResult } from './dtypes.js';

/** What the dtype comparison stores in bench/results/generation.json (`dtypes`). */
export interface DtypesOutput {
  readonly model: string;
  readonly started: string;
  readonly minutes: number;
  readonly commit: string;
  readonly load_average_at_start: readonly number[];
  readonly cpu_model: string;
  readonly nproc: number;
  readonly plan: {
    readonly concurrencies: readonly number[];
    readonly maxNewTokens: number;
    readonly promptWords: number;
  };
  readonly results: readonly DtypeResult[];
}

const MARKERS = {
  start: '<!-- generation-dtypes:start -->',
  end: '<!-- generation-dtypes:end -->',
  heading: '### Weight formats on a CPU (`pnpm bench:generation --dtype q4,q8,fp32`)',
};

const ratio = (value: number, base: number | undefined) =>
  base === undefined || !(base > 0) ? '' : ` (${(value / base).toFixed(2)}x)`;

/** The section's markdown. */
export function dtypesMarkdown(output: DtypesOutput): string {
  const fp32 = output.results.find((result) => result.dtype === 'fp32');
  const rows = output.results.flatMap((result) =>
    Object.entries(result.by_concurrency).map(([level, figures]) => {
      const base = fp32?.by_concurrency[level];
      return (
        `| ${result.dtype} | ${level.slice(1)} | ${figures.tokens_per_s}${ratio(figures.tokens_per_s, base?.tokens_per_s)} | ` +
        `${figures.ttft_p50_ms}${ratio(figures.ttft_p50_ms, base?.ttft_p50_ms)} | ${figures.ttft_p90_ms} | ` +
        `${figures.requests} | ${result.rss_loaded_mib} | ${result.rss_peak_mib} | ${result.file_mib} |`
      );
    }),
  );
  return [
    `llama-${output.model} (made-up weights, bundled tokenizer) in each weight format, continuous scheduling, one ` +
      `worker, greedy, ${output.plan.maxNewTokens} new tokens from prompts of ${output.plan.promptWords} words, no ` +
      'prefix cache; each dtype in a child process of its own, one after the other in one run. Ratios: to fp32 in ' +
      'the same run. RSS: the child process (MiB) once loaded and warmed, and its peak while the levels ran.',
    '',
    `Run ${output.started} (${output.minutes} min, commit ${output.commit}) on ${output.cpu_model}, nproc ` +
      `${output.nproc}, load average at start ${output.load_average_at_start.join(' / ')}: **the machine was shared ` +
      "with other engineers' builds and tests**. One run, the dtypes one after the other (not interleaved), c=1 " +
      "over three requests: the ratios carry the load's drift between dtypes too; rerun before relying on one.",
    '',
    '| dtype | concurrency | tokens/s | TTFT p50 ms | TTFT p90 ms | requests | RSS loaded | RSS peak | file MiB |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

/** Rewrites the section in BENCHMARKS.md (added at the end the first time). */
export function writeDtypesSection(path: string | URL, output: DtypesOutput): Promise<void> {
  return writeSection(path, MARKERS, dtypesMarkdown(output));
}
