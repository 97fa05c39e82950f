// The chart of `pnpm bench:generation`: completion tokens/s against concurrency for continuous and request-level
// scheduling next to the decode limit, and time to first token, as a standalone SVG (ECharts' server-side renderer,
// as bench/lib/chart.ts).
import * as echarts from 'echarts';

export interface ChartPoint {
  readonly concurrency: number;
  readonly continuous: number;
  readonly request: number;
  readonly decodeLimit: number;
  readonly limitWithPrefill: number;
  readonly ttftContinuous: number;
  readonly ttftRequest: number;
}

const WIDTH = 1000;
const HEIGHT = 420;

export function renderGenerationChart(points: readonly ChartPoint[]): string {
  const x = points.map((point) => String(point.concurrency));
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
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: WIDTH, height: HEIGHT });
  chart.setOption({
    animation: false,
    backgroundColor: '#ffffff',
    textStyle: { fontFamily: 'Helvetica, Arial, sans-serif' },
    title: [
      { text: 'text generation: continuous vs request-level scheduling (tinystories-656k, mixed workload)', left: 'center', top: 8, textStyle: { fontSize: 15 } },
      { text: 'completion tokens/s (higher is better)', left: '25%', textAlign: 'center', top: 62, textStyle: { fontSize: 13, fontWeight: 'normal' } },
      { text: 'time to first token p50 (ms, log scale)', left: '75%', textAlign: 'center', top: 62, textStyle: { fontSize: 13, fontWeight: 'normal' } },
    ],
    legend: { top: 34, itemWidth: 22, itemGap: 24, textStyle: { fontSize: 12 } },
    grid: [
      { left: 70, right: WIDTH / 2 + 30, top: 90, bottom: 56 },
      { left: WIDTH / 2 + 70, right: 30, top: 90, bottom: 56 },
    ],
    xAxis: [0, 1].map((gridIndex) => ({
      gridIndex,
      type: 'category',
      data: x,
      name: 'concurrent clients',
      nameLocation: 'middle',
      nameGap: 30,
      boundaryGap: false,
    })),
    yAxis: [
      { gridIndex: 0, type: 'value', min: 0 },
      { gridIndex: 1, type: 'log', logBase: 10 },
    ],
    series: [
      line('decode limit', points.map((point) => point.decodeLimit), '#2ca02c', 0, true),
      line('limit incl. prefill', points.map((point) => point.limitWithPrefill), '#98df8a', 0, true),
      line('continuous', points.map((point) => point.continuous), '#08519c', 0),
      line('request-level', points.map((point) => point.request), '#d62728', 0),
      line('continuous', points.map((point) => point.ttftContinuous), '#08519c', 1),
      line('request-level', points.map((point) => point.ttftRequest), '#d62728', 1),
    ],
  });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return `${svg}\n`;
}
