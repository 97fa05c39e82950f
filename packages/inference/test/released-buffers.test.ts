import { describe, expect, it } from 'vitest';
import { releaseBuffers } from '../src/runners/continuous/released-buffers.js';

describe('releaseBuffers', () => {
  it('detaches each buffer once, views of one buffer included, and leaves other arrays alone', () => {
    const kept = new Float32Array(16).fill(1);
    const freed = new Float32Array(1024);
    const view = freed.subarray(10, 20);
    const other = new BigInt64Array(8);
    releaseBuffers([freed, view, other]);
    expect([freed.buffer.byteLength, freed.length, view.length, other.buffer.byteLength]).toEqual([0, 0, 0, 0]);
    expect(kept.length).toBe(16);
    expect(kept[15]).toBe(1);
    // Already detached, or nothing to free: no throw.
    expect(() => releaseBuffers([freed, new Float32Array(0)])).not.toThrow();
  });
});
