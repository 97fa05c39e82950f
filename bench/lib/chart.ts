// The chart: throughput and p99 latency against concurrency for the offline limit, the unbatched server and the
// batched servers of one workload and framework, as a standalone SVG.
//
// Rendered with Apache ECharts' server-side SVG renderer (`ssr: true`, `renderToSVGString()`): it needs no DOM, no
// canvas and no browser, is actively maintained and widely used, and brings only zrender and tslib. Vega would work
// too but pulls in ~30 packages; Chart.js needs node-canvas (a native build) for Node; d3 and Plot need a DOM (jsdom).
import * as echarts from 'echarts';
import type { Summary } from './report.js';
import { cellOf, offlineOf } from './report.js';
import type { Framework } from './servers.js';
import { workloadOf } from './workloads.js';
import type { WorkloadName } from './workloads.js';

const WIDTH = 1000;
const HEIGHT = 440;
const UNBATCHED_COLOR = '#d62728';
const BATCHED_COLORS: Record<number, string> = { 8: '#9ecae1', 16: '#4292c6', 32: '#08519c' };
const OFFLINE_COLOR = '#2ca02c';

export function renderChart(summary: Summary, workload: WorkloadName, framework: Framework): string {
  const points = summary.sweep.filter((point) => point.workload === workload && point.framework === framework);
  const concurrencies = [...new Set(points.map((point) => point.concurrency))].sort((a, b) => a - b);
  const sizes = [...new Set(points.map((point) => point.max_batch_size))].sort((a, b) => a - b);
  const largest = Math.max(...sizes);
  const offline = offlineOf(summary.offline, workload, largest);
  const nameOf = (size: number) => (size === 1 ? 'unbatched' : `batched ≤${size}`);
  const colorOf = (size: number) => (size === 1 ? UNBATCHED_COLOR : (BATCHED_COLORS[size] ?? '#08519c'));
  const cells = (size: number, key: 'items_per_s' | 'p99_ms') =>
    concurrencies.map((concurrency) => {
      const value = cellOf(summary.sweep, workload, framework, size, concurrency)?.[key];
      return value === undefined ? null : Math.round(value * 10) / 10;
    });
  const line = (size: number, key: 'items_per_s' | 'p99_ms', axis: number) => ({
    name: nameOf(size),
    type: 'line' as const,
    xAxisIndex: axis,
    yAxisIndex: axis,
    data: cells(size, key),
    color: colorOf(size),
    symbolSize: 7,
    lineStyle: { width: size === 1 || size === largest ? 3 : 1.5 },
  });
  return twoPanelChart({
    title: `${framework}: ${workloadOf(workload).title}`,
    left: 'throughput (items/s, higher is better)',
    right: 'p99 latency (ms, log scale, lower is better)',
    x: concurrencies.map(String),
    height: HEIGHT,
    legendGap: 28,
    series: [
      {
        name: `offline limit (batches of ${largest})`,
        type: 'line',
        xAxisIndex: 0,
        yAxisIndex: 0,
        data: concurrencies.map(() => Math.round(offline)),
        color: OFFLINE_COLOR,
        symbol: 'none',
        lineStyle: { type: 'dashed', width: 2 },
      },
      ...sizes.map((size) => line(size, 'items_per_s', 0)),
      ...sizes.map((size) => line(size, 'p99_ms', 1)),
    ],
  });
}

/** What {@link twoPanelChart} draws: a linear panel on the left, a log-scale one on the right, against concurrency. */
export interface TwoPanels {
  readonly title: string;
  readonly left: string;
  readonly right: string;
  /** The concurrency levels, the shared x axis. */
  readonly x: readonly string[];
  readonly height: number;
  readonly legendGap: number;
  /** ECharts line series; `xAxisIndex`/`yAxisIndex` 0 is the left panel, 1 the right. */
  readonly series: readonly object[];
}

/**
 * The benchmarks' chart layout (this file's and `pnpm bench:generation`'s), as a standalone SVG string.
 *
 * @example
 * ```ts
 * const svg = twoPanelChart({ title, left: 'tokens/s', right: 'p50 (ms)', x: ['8', '32'], height: 420, legendGap: 24, series });
 * ```
 */
export function twoPanelChart(panels: TwoPanels): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: WIDTH, height: panels.height });
  chart.setOption({
    animation: false,
    backgroundColor: '#ffffff',
    textStyle: { fontFamily: 'Helvetica, Arial, sans-serif' },
    title: [
      { text: panels.title, left: 'center', top: 8, textStyle: { fontSize: 15 } },
      {
        text: panels.left,
        left: '25%',
        textAlign: 'center',
        top: 62,
        textStyle: { fontSize: 13, fontWeight: 'normal' },
      },
      {
        text: panels.right,
        left: '75%',
        textAlign: 'center',
        top: 62,
        textStyle: { fontSize: 13, fontWeight: 'normal' },
      },
    ],
    // Generous gaps: the SSR renderer estimates text widths, and viewers' fonts differ.
    legend: { top: 34, itemWidth: 22, itemGap: panels.legendGap, textStyle: { fontSize: 12 } },
    grid: [
      { left: 70, right: WIDTH / 2 + 30, top: 90, bottom: 56 },
      { left: WIDTH / 2 + 70, right: 30, top: 90, bottom: 56 },
    ],
    xAxis: [0, 1].map((gridIndex) => ({
      gridIndex,
      type: 'category',
      data: [...panels.x],
      name: 'concurrent clients',
      nameLocation: 'middle',
      nameGap: 30,
      boundaryGap: false,
    })),
    yAxis: [
      { gridIndex: 0, type: 'value', min: 0 },
      { gridIndex: 1, type: 'log', logBase: 10 },
    ],
    series: [...panels.series],
  });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return `${svg}\n`;
}
