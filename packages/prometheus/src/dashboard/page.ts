// The dashboard page: one self-contained HTML document (inline CSS and script, charts drawn as plain SVG), so it
// loads from the server alone, with no CDN and no build step. It polls `?data` for the server's own figures.

/** The charts, in order: the title, the unit, and the series of each (key path into a point, legend, colour). */
const CHARTS = [
  {
    id: 'batch',
    title: 'Batch size',
    unit: 'items per batch',
    series: [
      ['batchSize', 'batcher batch', '#2563eb'],
      ['decodeRows', 'decode rows / step', '#9333ea'],
    ],
  },
  {
    id: 'queue',
    title: 'Queue depth',
    unit: 'requests',
    series: [
      ['queue', 'waiting', '#d97706'],
      ['running', 'running', '#059669'],
    ],
  },
  { id: 'items', title: 'Throughput', unit: 'items / s', series: [['itemsPerS', 'items / s', '#2563eb']] },
  { id: 'tokens', title: 'Token throughput', unit: 'tokens / s', series: [['tokensPerS', 'tokens / s', '#059669']] },
  {
    id: 'ttft',
    title: 'Time to first token',
    unit: 'seconds',
    series: [
      ['ttft.p50', 'p50', '#059669'],
      ['ttft.p90', 'p90', '#d97706'],
      ['ttft.p99', 'p99', '#dc2626'],
    ],
  },
  {
    id: 'e2e',
    title: 'End-to-end latency',
    unit: 'seconds',
    series: [
      ['e2e.p50', 'p50', '#059669'],
      ['e2e.p90', 'p90', '#d97706'],
      ['e2e.p99', 'p99', '#dc2626'],
    ],
  },
  {
    id: 'refusals',
    title: 'Refusals',
    unit: 'per second (503s)',
    series: [['refusalsPerS', 'refused / s', '#dc2626']],
  },
] as const;

// The browser side, as plain ES2020 (it is sent as is). `render` redraws every chart from the points.
const SCRIPT = String.raw`
const CHARTS = __CHARTS__;
const NS = 'http://www.w3.org/2000/svg';
const W = 560, H = 200, L = 52, R = 12, T = 10, B = 26;
const get = (point, path) => path.split('.').reduce((v, k) => (v == null ? null : v[k]), point);
const fmt = (v) => v == null || !isFinite(v) ? '–' : v === 0 ? '0' : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3);
function nice(max) {
  if (!(max > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(max)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}
function el(name, attrs, parent, text) {
  const node = document.createElementNS(NS, name);
  for (const k in attrs) node.setAttribute(k, attrs[k]);
  if (text != null) node.textContent = text;
  parent.appendChild(node);
  return node;
}
function panel(chart) {
  const section = document.createElement('section');
  section.className = 'panel';
  section.innerHTML = '<header><h2></h2><span class="unit"></span></header><div class="now"></div><div class="legend"></div>';
  section.querySelector('h2').textContent = chart.title;
  section.querySelector('.unit').textContent = chart.unit;
  for (const [, label, color] of chart.series) {
    const item = document.createElement('span');
    item.innerHTML = '<i></i>';
    item.querySelector('i').style.background = color;
    item.append(label);
    section.querySelector('.legend').appendChild(item);
  }
  const svg = el('svg', { viewBox: '0 0 ' + W + ' ' + H, id: 'chart-' + chart.id, role: 'img', 'aria-label': chart.title }, section);
  document.getElementById('grid').appendChild(section);
  return { section, svg };
}
const panels = CHARTS.map((chart) => ({ chart, ...panel(chart) }));
function render(data) {
  const span = data.windowMs, end = data.now, start = end - span;
  const x = (t) => L + ((t - start) / span) * (W - L - R);
  for (const { chart, section, svg } of panels) {
    svg.replaceChildren();
    let max = 0;
    for (const p of data.points) for (const [path] of chart.series) { const v = get(p, path); if (v != null && v > max) max = v; }
    const top = nice(max);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      el('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }, svg);
      el('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, svg, fmt(v));
    }
    const minutes = Math.round(span / 60000);
    for (let m = 0; m <= minutes; m++) {
      const t = start + m * 60000;
      el('text', { x: x(t), y: H - 6, 'text-anchor': 'middle', class: 'tick' }, svg, m === minutes ? 'now' : '-' + (minutes - m) + ' min');
    }
    let drawn = 0;
    for (const [path, , color] of chart.series) {
      let d = '';
      let pen = false;
      for (const p of data.points) {
        const v = get(p, path);
        if (v == null) { pen = false; continue; }
        d += (pen ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(v).toFixed(1);
        pen = true;
        drawn++;
      }
      if (d) el('path', { d, stroke: color, class: 'line', 'data-series': path }, svg);
    }
    svg.dataset.points = String(drawn);
    // The latest value of each series (a batch size or a percentile may be missing from the last interval).
    const latest = (path) => {
      for (let i = data.points.length - 1; i >= 0; i--) { const v = get(data.points[i], path); if (v != null) return v; }
      return null;
    };
    section.querySelector('.now').textContent = chart.series.map(([path, label]) => label + ' ' + fmt(latest(path))).join('   ');
    if (drawn === 0) el('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, svg, 'no data yet');
  }
  document.getElementById('status').textContent = 'updated ' + new Date(data.now).toLocaleTimeString() + ' · every ' + data.intervalMs / 1000 + ' s';
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}
async function poll() {
  try {
    const response = await fetch(location.pathname + '?data=1', { cache: 'no-store' });
    const data = await response.json();
    render(data);
    setTimeout(poll, data.intervalMs);
  } catch (error) {
    document.getElementById('status').textContent = 'server unreachable, retrying…';
    setTimeout(poll, 2000);
  }
}
poll();
`;

const STYLE = `
body { font: 14px system-ui, sans-serif; margin: 0; background: #f8fafc; color: #0f172a; }
h1 { font-size: 18px; margin: 0; }
.top { display: flex; justify-content: space-between; align-items: baseline; padding: 14px 20px; background: #fff;
  border-bottom: 1px solid #e2e8f0; }
#status { color: #64748b; }
#grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); gap: 14px; padding: 14px 20px; }
.panel { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 10px 12px; }
.panel header { display: flex; justify-content: space-between; align-items: baseline; }
h2 { font-size: 15px; margin: 0; }
.unit, .legend { color: #64748b; font-size: 12px; }
.now { font: 600 16px ui-monospace, monospace; margin: 4px 0; white-space: pre; }
.legend span { margin-right: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
svg { width: 100%; height: auto; display: block; }
.grid { stroke: #e2e8f0; }
.tick { fill: #64748b; font-size: 11px; }
.line { fill: none; stroke-width: 2; }
.empty { fill: #94a3b8; font-size: 13px; }
`;

/** The dashboard's HTML, titled `title` (escaped). */
export function dashboardPage(title: string): string {
  const escaped = title.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const script = SCRIPT.replace('__CHARTS__', JSON.stringify(CHARTS));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escaped}</title>
<style>${STYLE}</style>
</head>
<body>
<div class="top"><h1>${escaped}</h1><span id="status">loading…</span></div>
<main id="grid"></main>
<script>${script}</script>
</body>
</html>
`;
}
