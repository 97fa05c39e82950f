// Measures the decode-step cost model of the loaded model once, at load: a few steps on zeroed KV data at three
// shapes give the per-call, per-row and per-row-per-past-token costs that decide the length groups, and a few KV
// copies give the cost of moving rows between groups.
import type { InferenceSession } from 'onnxruntime-node';
import type { StepCostModel } from './length-groups.js';
import { copyRow, decodeFeeds, kvArray } from './padded-batch.js';
import type { KvSource, ModelGeometry } from './padded-batch.js';

function zeroSource(geometry: ModelGeometry, rows: number, past: number): KvSource {
  const size = rows * geometry.kvHeads * past * geometry.headDim;
  return { data: geometry.pastNames.map(() => kvArray(geometry, size)), past };
}

async function stepMs(session: InferenceSession, geometry: ModelGeometry, rows: number, past: number): Promise<number> {
  const source = zeroSource(geometry, rows, past);
  const members = Array.from({ length: rows }, (_, row) => ({ source, row, length: past, next: geometry.padTokenId }));
  const feeds = decodeFeeds(members, source, geometry);
  let best = Number.POSITIVE_INFINITY;
  for (let trial = 0; trial < 6; trial += 1) {
    const started = performance.now();
    await session.run(feeds);
    // The first run pays one-time allocations; the fastest of the others is the step's cost.
    if (trial > 0) best = Math.min(best, performance.now() - started);
  }
  return best;
}

/**
 * The cost of copying one row-position of KV, from composing 32 rows of 128 positions into arrays used before (as
 * recompositions write into recycled arrays; the median of 5).
 */
function copyMs(geometry: ModelGeometry): number {
  const rows = 32;
  const past = 128;
  const source = zeroSource(geometry, rows, past);
  const into = zeroSource(geometry, rows, past).data;
  const times: number[] = [];
  for (let trial = 0; trial < 5; trial += 1) {
    const started = performance.now();
    for (let row = 0; row < rows; row += 1) copyRow({ source, row, length: past }, into, row, past, geometry);
    times.push(performance.now() - started);
  }
  return (times.sort((a, b) => a - b)[2] as number) / (rows * past);
}

/** Fits `callMs + rows * (rowMs + past * rowPastMs)` to three measured shapes, and measures `copyMs`. */
export async function calibrateStepCost(session: InferenceSession, geometry: ModelGeometry): Promise<StepCostModel> {
  const small = await stepMs(session, geometry, 1, 8);
  const wide = await stepMs(session, geometry, 16, 8);
  const long = await stepMs(session, geometry, 16, 128);
  const rowPastMs = Math.max(1e-6, (long - wide) / (16 * 120));
  const rowMs = Math.max(1e-6, (wide - small - 15 * 8 * rowPastMs) / 15);
  const callMs = Math.max(1e-3, small - rowMs - 8 * rowPastMs);
  return { callMs, rowMs, rowPastMs, copyMs: Math.max(1e-7, copyMs(geometry)) };
}
