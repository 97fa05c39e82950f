// Measures the decode-step cost model of the loaded model once, at load: a few steps on zeroed KV data at three
// shapes give the per-call, per-row and per-row-per-past-token costs that decide the length groups.
import type { InferenceSession } from 'onnxruntime-node';
import type { StepCostModel } from './length-groups.js';
import { decodeFeeds } from './padded-batch.js';
import type { ModelGeometry } from './padded-batch.js';

async function stepMs(session: InferenceSession, geometry: ModelGeometry, rows: number, past: number): Promise<number> {
  const size = rows * geometry.kvHeads * past * geometry.headDim;
  const source = { data: geometry.pastNames.map(() => new Float32Array(size)), past };
  const members = Array.from({ length: rows }, (_, row) => ({ source, row, length: past, next: geometry.padTokenId }));
  const feeds = decodeFeeds(members, source, geometry);
  let best = Number.POSITIVE_INFINITY;
  for (let trial = 0; trial < 4; trial += 1) {
    const started = performance.now();
    await session.run(feeds);
    // The first run pays one-time allocations; the fastest of the others is the step's cost.
    if (trial > 0) best = Math.min(best, performance.now() - started);
  }
  return best;
}

/** Fits `callMs + rows * (rowMs + past * rowPastMs)` to three measured shapes. */
export async function calibrateStepCost(session: InferenceSession, geometry: ModelGeometry): Promise<StepCostModel> {
  const small = await stepMs(session, geometry, 1, 8);
  const wide = await stepMs(session, geometry, 16, 8);
  const long = await stepMs(session, geometry, 16, 128);
  const rowPastMs = Math.max(1e-6, (long - wide) / (16 * 120));
  const rowMs = Math.max(1e-6, (wide - small - 15 * 8 * rowPastMs) / 15);
  const callMs = Math.max(1e-3, small - rowMs - 8 * rowPastMs);
  return { callMs, rowMs, rowPastMs };
}
