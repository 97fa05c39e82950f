// The chart of `pnpm bench:generation`: completion tokens/s against concurrency for continuous and request-level
// scheduling next to the decode limit, and time to first token, as a standalone SVG (ECharts' server-side renderer,
// as bench/lib/chart.ts).
import { twoPanelChart } from '../lib/chart.js';

export interface ChartPoint {
  readonly concurrency: number;
  readonly continuous: number;
  readonly request: number;
  readonly decodeLimit: number;
  readonly limitWithPrefill: number;
  readonly ttftContinuous: number;
  readonly ttftRequest: number;
}

const HEIGHT = 420;

export function renderGenerationChart(points: readonly ChartPoint[]): string {
  const line = (name: string, data: number[], color: string, axis: number, dashed = false) => ({
    name,
    type: 'line' as const,
    xAxisIndex: axis,
    yAxisIndex: axis,
    data,
    color,
    symbolSize: 7,
    lineStyle: { width: dashed ? 2 : 3, type: dashed ? ('dashed' as const) : ('solid' as const) },
  });
  return twoPanelChart({
    title: 'text generation: continuous vs request-level scheduling (tinystories-656k, mixed workload)',
    left: 'completion tokens/s (higher is better)',
    right: 'time to first token p50 (ms, log scale)',
    x: points.map((point) => String(point.concurrency)),
    height: HEIGHT,
    legendGap: 24,
    series: [
      line(
        'decode limit',
        points.map((point) => point.decodeLimit),
        '#2ca02c',
        0,
        true,
      ),
      line(
        'limit incl. prefill',
        points.map((point) => point.limitWithPrefill),
        '#98df8a',
        0,
        true,
      ),
      line(
        'continuous',
        points.map((point) => point.continuous),
        '#08519c',
        0,
      ),
      line(
        'request-level',
        points.map((point) => point.request),
        '#d62728',
        0,
      ),
      line(
        'continuous',
        points.map((point) => point.ttftContinuous),
        '#08519c',
        1,
      ),
      line(
        'request-level',
        points.map((point) => point.ttftRequest),
        '#d62728',
        1,
      ),
    ],
  });
}
