// The soak's figures: the probe's series read back, the growth of each over the run's last half against its bound,
// and an SVG of the series (each on its own scale, labelled with its range) for bench/results/.

/** One probe line (see probe.mjs). */
export interface Sample {
  readonly at: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly handles: number;
  readonly fds: number;
  readonly loopP99Ms: number;
  readonly loopMaxMs: number;
}

/** A series the pass rule bounds: relative growth (fraction) for memory, absolute for counts. */
export const BOUNDS = {
  rss: { relative: 0.05 },
  heapUsed: { relative: 0.1 },
  external: { relative: 0.1 },
  handles: { absolute: 10 },
  fds: { absolute: 10 },
} as const;
export type Series = keyof typeof BOUNDS;

export interface Growth {
  readonly from: number;
  readonly to: number;
  /** `to - from` for counts, `(to - from) / from` for memory. */
  readonly growth: number;
  readonly bound: number;
  readonly ok: boolean;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

/**
 * Each series' growth over the last half: the median of the three samples at its start against the median of the
 * last three (medians, so one sample taken during a burst of in-flight requests does not decide).
 */
export function lastHalfGrowth(samples: readonly Sample[]): Record<Series, Growth> {
  const half = Math.floor(samples.length / 2);
  const start = samples.slice(Math.max(0, half - 1), half + 2);
  const end = samples.slice(-3);
  const result = {} as Record<Series, Growth>;
  for (const [name, bound] of Object.entries(BOUNDS) as Array<[Series, (typeof BOUNDS)[Series]]>) {
    const from = median(start.map((sample) => sample[name]));
    const to = median(end.map((sample) => sample[name]));
    if ('relative' in bound) {
      const growth = (to - from) / from;
      result[name] = { from, to, growth, bound: bound.relative, ok: growth <= bound.relative };
    } else {
      const growth = to - from;
      result[name] = { from, to, growth, bound: bound.absolute, ok: growth <= bound.absolute };
    }
  }
  return result;
}

const COLORS: Record<string, string> = {
  rss: '#1f77b4',
  heapUsed: '#ff7f0e',
  external: '#2ca02c',
  handles: '#d62728',
  fds: '#9467bd',
  loopP99Ms: '#8c564b',
};

/** The series as one SVG: a panel per series (own scale, min and max written), time on x. */
export function soakSvg(title: string, samples: readonly Sample[]): string {
  const names = Object.keys(COLORS) as Array<keyof Sample>;
  const width = 720;
  const panel = 90;
  const left = 150;
  const height = 40 + names.length * panel;
  const t0 = samples[0]?.at ?? 0;
  const t1 = Math.max(t0 + 1, samples.at(-1)?.at ?? 1);
  const x = (at: number) => left + ((at - t0) / (t1 - t0)) * (width - left - 20);
  const rows = names.map((name, index) => {
    const values = samples.map((sample) => sample[name]);
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    const top = 30 + index * panel;
    const y = (value: number) => top + panel - 20 - ((value - lo) / (hi - lo || 1)) * (panel - 30);
    const points = samples.map((sample) => `${x(sample.at).toFixed(1)},${y(sample[name]).toFixed(1)}`).join(' ');
    const fmt = (value: number) =>
      name === 'rss' || name === 'heapUsed' || name === 'external'
        ? `${(value / 2 ** 20).toFixed(1)} MiB`
        : name === 'loopP99Ms'
          ? `${value.toFixed(1)} ms`
          : String(value);
    return (
      `<text x="8" y="${top + 14}" font-size="12" fill="${COLORS[name]}">${name}</text>` +
      `<text x="8" y="${top + 30}" font-size="10">max ${fmt(hi)}</text>` +
      `<text x="8" y="${top + 44}" font-size="10">min ${fmt(lo)}</text>` +
      `<line x1="${left}" y1="${top + panel - 20}" x2="${width - 20}" y2="${top + panel - 20}" stroke="#ccc"/>` +
      `<polyline fill="none" stroke="${COLORS[name]}" stroke-width="1.5" points="${points}"/>`
    );
  });
  const minutes = ((t1 - t0) / 60_000).toFixed(1);
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">` +
    `<rect width="100%" height="100%" fill="white"/>` +
    `<text x="8" y="18" font-size="13">${title} (${minutes} min, a sample every ${samples.length > 1 ? Math.round((t1 - t0) / (samples.length - 1) / 1000) : 0} s)</text>` +
    rows.join('') +
    '</svg>\n'
  );
}
