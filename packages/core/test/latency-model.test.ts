// The latency model on its own: a weighted least-squares fit of handler time against batch cost, fed batch by
// batch, and the cautious readings admission relies on. Every figure below follows from the batches added.
import { describe, expect, it } from 'vitest';
import { LatencyModel } from '../src/latency-model.js';

function modelOf(batches: ReadonlyArray<readonly [cost: number, ms: number]>): LatencyModel {
  const model = new LatencyModel();
  for (const [cost, ms] of batches) model.add(cost, ms);
  return model;
}

describe('LatencyModel', () => {
  it('is ready after 5 batches, and counts the batches it holds', () => {
    const model = new LatencyModel();
    expect(model.ready).toBe(false);
    for (let index = 1; index <= 4; index += 1) model.add(index, 10 + index);
    expect(model.ready).toBe(false);
    expect(model.snapshot().samples).toBe(4);
    model.add(5, 15);
    expect(model.ready).toBe(true);
    expect(model.snapshot()).toMatchObject({ ready: true, samples: 5 });
  });

  it('recovers an exact linear model: ms = 2 * cost + 10, with no error band', () => {
    const model = modelOf([
      [1, 12],
      [2, 14],
      [4, 18],
      [8, 26],
      [16, 42],
    ]);
    expect(model.msPerCost).toBeCloseTo(2, 9);
    expect(model.msPerBatch).toBeCloseTo(10, 9);
    expect(model.predict(10)).toBeCloseTo(30, 9);
    expect(model.predict(32)).toBeCloseTo(74, 9);
    expect(model.relativeError).toBeCloseTo(0, 9);
    expect(model.spread).toBe(0);
  });

  it('never predicts a batch quicker than the quickest of the last 10', () => {
    const model = modelOf([
      [1, 12],
      [2, 14],
      [4, 18],
      [8, 26],
      [16, 42],
    ]);
    // The line says 11 ms for cost 0.5, but no recent batch took less than 12 ms.
    expect(model.predict(0.5)).toBe(12);
  });

  it('reads batches that all cost the same as fixed time up to that cost, proportional beyond', () => {
    const model = modelOf(Array.from({ length: 6 }, () => [8, 40] as const));
    expect(model.msPerCost).toBeCloseTo(5, 9);
    expect(model.msPerBatch).toBe(0);
    expect(model.predict(4)).toBeCloseTo(40, 9); // a smaller batch is not predicted cheaper
    expect(model.predict(16)).toBeCloseTo(80, 9);
  });

  it('treats a negative slope as noise: all fixed time, the decay-weighted mean', () => {
    // Larger batches look faster; the newest batch weighs 1, each older one 0.85 times the next.
    const model = modelOf([
      [2, 50],
      [4, 40],
      [6, 30],
      [8, 20],
      [10, 10],
    ]);
    expect(model.msPerCost).toBe(0);
    expect(model.msPerBatch).toBeCloseTo(26.786246947576, 9);
    expect(model.predict(1)).toBeCloseTo(26.786246947576, 9);
    expect(model.predict(100)).toBeCloseTo(26.786246947576, 9);
  });

  it('treats a negative fixed time as noise: fits through the origin', () => {
    // ms = 3 * cost - 5 exactly: refitted as ms = a * cost with the weighted sums, a = Σw·x·y / Σw·x².
    const model = modelOf([
      [2, 1],
      [4, 7],
      [6, 13],
      [8, 19],
      [10, 25],
    ]);
    expect(model.msPerBatch).toBe(0);
    expect(model.msPerCost).toBeCloseTo(2.359531070026, 9);
    expect(model.predict(10)).toBeCloseTo(23.59531070026, 8);
  });

  it('measures how far batch times stray from the fit, and reads twice that as its band', () => {
    // Cost 8 every time, 44 and 36 ms in turn (±10% around 40): the weighted mean is 39.68 ms (the newest, 36 ms,
    // weighs most), and the weighted root mean square of the relative errors is 0.1005.
    const model = modelOf(Array.from({ length: 6 }, (_, index) => [8, index % 2 === 0 ? 44 : 36] as const));
    expect(model.predict(8)).toBeCloseTo(39.675675675676, 9);
    expect(model.relativeError).toBeCloseTo(0.100485498172, 9);
    expect(model.spread).toBeCloseTo(0.200970996344, 9);
  });

  it('caps the band at one half however noisy the batches', () => {
    const model = modelOf(Array.from({ length: 6 }, (_, index) => [8, index % 2 === 0 ? 100 : 1] as const));
    expect(model.relativeError).toBeGreaterThan(0.25);
    expect(model.spread).toBe(0.5);
  });

  it('forgets batches older than its window of 50: a model that sped up is fitted on its new times alone', () => {
    const model = new LatencyModel();
    for (let index = 0; index < 50; index += 1) model.add(1 + (index % 5), 100 * (1 + (index % 5)));
    expect(model.msPerCost).toBeCloseTo(100, 6);
    for (let index = 0; index < 50; index += 1) model.add(1 + (index % 5), 1 + (1 + (index % 5)));
    expect(model.snapshot().samples).toBe(50);
    expect(model.msPerCost).toBeCloseTo(1, 9);
    expect(model.msPerBatch).toBeCloseTo(1, 9);
  });

  it('follows a model that slows down within a few batches, before the window turns over', () => {
    const model = new LatencyModel();
    for (let index = 0; index < 40; index += 1) model.add(1 + (index % 4), 10 * (1 + (index % 4)));
    for (let index = 0; index < 8; index += 1) model.add(1 + (index % 4), 20 * (1 + (index % 4)));
    // 40 batches at 10 ms per unit of cost, then 8 at 20: an unweighted fit would say about 11.7 ms; with the newest
    // batch weighing 1 and each older one 0.85 times the next, the last 8 carry 73% of the weight and the fit says
    // 17.28 ms.
    expect(model.msPerCost).toBeCloseTo(17.278074122821, 6);
    expect(model.msPerBatch).toBeCloseTo(0, 6);
  });
});
