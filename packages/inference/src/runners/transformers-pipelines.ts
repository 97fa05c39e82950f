// The pipeline-based transformers.js runners: feature extraction and text classification.
import { pipeline } from '@huggingface/transformers';
import type { FeatureExtractionPipeline, TextClassificationPipeline } from '@huggingface/transformers';
import { InputError } from '../contract/errors.js';
import type { ItemResult, WorkerInit } from '../contract/messages.js';
import type { ClassificationLabel } from '../contract/task-types.js';
import type { FeatureExtractionRunnerSpec, TextClassificationRunnerSpec } from '../contract/runner-specs.js';
import { localModel } from './local-model.js';
import { GRAPH_NAMES } from './model-files.js';
import { partitionValid } from './runner.js';
import type { Runner } from './runner.js';

/** Keeps the inputs that are non-empty strings; the others get an `INVALID_INPUT` result. */
export function checkTexts(
  inputs: readonly unknown[],
  results: ItemResult[],
): { readonly index: number; readonly value: string }[] {
  return partitionValid(
    inputs,
    (input) => {
      if (typeof input !== 'string' || input.length === 0)
        throw new InputError(undefined, 'Expected a non-empty string');
      return input;
    },
    results,
  );
}

/** Loads a transformers.js `feature-extraction` pipeline; the whole batch is one padded model call. */
export async function loadFeatureExtractionRunner(
  spec: Required<FeatureExtractionRunnerSpec>,
  init: WorkerInit,
): Promise<Runner> {
  const { id, options } = localModel(spec.model, init, spec.dtype, GRAPH_NAMES.encoder);
  const extractor: FeatureExtractionPipeline = await pipeline('feature-extraction', id, options);
  // The pipeline pools by position: the first token is real only with right padding, the last only with left.
  extractor.tokenizer.padding_side = spec.pooling === 'last_token' ? 'left' : 'right';
  return {
    async run(inputs) {
      const results: ItemResult[] = new Array(inputs.length);
      const valid = checkTexts(inputs, results);
      if (valid.length === 0) return results;
      const output = await extractor(
        valid.map((item) => item.value),
        { pooling: spec.pooling, normalize: spec.normalize },
      );
      const vectors = output.tolist() as number[][];
      valid.forEach((item, position) => {
        results[item.index] = { ok: true, value: vectors[position] };
      });
      return results;
    },
  };
}

/** Loads a transformers.js `text-classification` pipeline; the whole batch is one padded model call. */
export async function loadTextClassificationRunner(
  spec: Required<TextClassificationRunnerSpec>,
  init: WorkerInit,
): Promise<Runner> {
  const { id, options } = localModel(spec.model, init, spec.dtype, GRAPH_NAMES.encoder);
  const classifier: TextClassificationPipeline = await pipeline('text-classification', id, options);
  return {
    async run(inputs) {
      const results: ItemResult[] = new Array(inputs.length);
      const valid = checkTexts(inputs, results);
      if (valid.length === 0) return results;
      const output = (await classifier(
        valid.map((item) => item.value),
        { top_k: spec.topK },
      )) as unknown as (ClassificationLabel | ClassificationLabel[])[];
      valid.forEach((item, position) => {
        // With top_k 1 the pipeline flattens to one label per text; with more, a list per text.
        const labels = output[position] as ClassificationLabel | ClassificationLabel[];
        results[item.index] = { ok: true, value: Array.isArray(labels) ? labels : [labels] };
      });
      return results;
    },
  };
}
