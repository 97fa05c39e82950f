// What the worker needs from a runner. Runners live only in the worker bundle: importing them loads
// onnxruntime-node and transformers.js, which must never happen on the main thread.
import { serializeError } from '../protocol.js';
import type { ItemResult, StepSlot, WorkerInit } from '../protocol.js';

/** Emits one streamed step: one slot per input of the batch. */
export type EmitStep = (slots: readonly StepSlot[]) => void;

/** A loaded model that runs whole batches. */
export interface Runner {
  /**
   * Runs one batch; `emit` is given only for streaming calls (and only runners that stream use it). A runner that
   * works in steps stops early once `cancelled()` is true (its results are then discarded).
   */
  run(inputs: readonly unknown[], emit: EmitStep | undefined, cancelled?: () => boolean): Promise<ItemResult[]>;
}

/** Loads the runner a worker was started for; each task's module is imported only when that task is used. */
export async function loadRunner(init: WorkerInit): Promise<Runner> {
  const { spec } = init;
  switch (spec.task) {
    case 'text-generation':
      return (await import('./text-generation.js')).loadTextGenerationRunner(spec, init);
    case 'feature-extraction':
      return (await import('./transformers-pipelines.js')).loadFeatureExtractionRunner(spec, init);
    case 'text-classification':
      return (await import('./transformers-pipelines.js')).loadTextClassificationRunner(spec, init);
    case 'onnx':
      return (await import('./onnx.js')).loadOnnxRunner(spec, init);
  }
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
