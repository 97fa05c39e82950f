// What the worker needs from a runner, and the helpers runners share. Runners live only in the worker bundle:
// importing them loads onnxruntime-node and transformers.js, which must never happen on the main thread.
import type { DecodeActivity } from '../contract/decode-activity.js';
import { serializeError } from '../contract/errors.js';
import type { ItemResult, StepSlot } from '../contract/messages.js';

/** Emits one streamed step: one slot per input of the batch. */
export type EmitStep = (slots: readonly StepSlot[]) => void;

/** A loaded model that runs batches. */
export interface Runner {
  /**
   * Runs one batch; `emit` is given only for streaming calls (and only runners that stream use it). A runner that
   * works in steps stops early once `cancelled()` is true (its results are then discarded). A runner with
   * `concurrent` set accepts a new `run()` while others are in progress (continuous batching merges them).
   */
  run(inputs: readonly unknown[], emit: EmitStep | undefined, cancelled?: () => boolean): Promise<ItemResult[]>;
  /**
   * The buffers of one batch's results that the worker may hand to the main thread rather than copy: each one the
   * runner made for these results alone and never reads again (the raw ONNX runner's per-item slices).
   * Absent: results are copied (structured clone), as any runner's may be.
   */
  transferables?(results: readonly ItemResult[]): ArrayBuffer[];
  /** Counters the runner keeps, for benchmarks and tests (plain data). */
  stats?(): Record<string, number>;
  /** Continuous text generation: where the decode loop reports its activity (a few times a second while busy). */
  onActivity?(listener: (activity: DecodeActivity) => void): void;
}

/** Runs `check` on each input; the ones that throw become `INVALID_INPUT` results and the rest are returned. */
export function partitionValid<T>(
  inputs: readonly unknown[],
  check: (input: unknown) => T,
  results: ItemResult[],
): { readonly index: number; readonly value: T }[] {
  const valid: { index: number; value: T }[] = [];
  inputs.forEach((input, index) => {
    try {
      valid.push({ index, value: check(input) });
    } catch (error) {
      results[index] = { ok: false, error: serializeError(error) };
    }
  });
  return valid;
}
