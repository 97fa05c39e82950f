// The transformers.js side of the worker: local-only model loading and the pipeline-based runners.
import { existsSync } from 'node:fs';
import { basename, dirname, join, sep } from 'node:path';
import { env, pipeline } from '@huggingface/transformers';
import type { FeatureExtractionPipeline, Tensor, TextClassificationPipeline } from '@huggingface/transformers';
import { InputError } from '../protocol.js';
import type { ItemResult, WorkerInit } from '../protocol.js';
import type { ClassificationLabel, FeatureExtractionRunnerSpec, TextClassificationRunnerSpec } from '../runner-types.js';
import { partitionValid } from './runner.js';
import type { Runner } from './runner.js';

/** The files every fp32 transformers.js model folder has. */
const MODEL_FILES = ['config.json', 'tokenizer.json', join('onnx', 'model.onnx')];

/** What `from_pretrained` needs to load a local model folder with the worker's device and threads. */
export interface LocalModel {
  /** The folder name, resolved by transformers.js against `env.localModelPath`. */
  readonly id: string;
  readonly options: {
    readonly dtype: 'fp32';
    readonly device: 'cpu';
    readonly session_options: Record<string, unknown>;
  };
}

/**
 * Points transformers.js at the model's parent folder and forbids the hub, so a missing file fails at once
 * instead of being fetched. One worker hosts one model, so setting the global `env` here is safe.
 */
export function localModel(modelDir: string, init: WorkerInit): LocalModel {
  // transformers.js reports a missing folder as an unrelated TypeError; name the missing files instead.
  const missing = MODEL_FILES.filter((file) => !existsSync(join(modelDir, file)));
  if (missing.length > 0) throw new Error(`missing ${missing.join(', ')} (expected a transformers.js model folder, fp32)`);
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = dirname(modelDir) + sep;
  return {
    id: basename(modelDir),
    options: {
      dtype: 'fp32',
      // transformers.js takes the provider as its `device`; only the names it knows are accepted, so an
      // unsupported provider fails the load with its own message.
      device: init.executionProvider as 'cpu',
      session_options: { intraOpNumThreads: init.threads, interOpNumThreads: 1 },
    },
  };
}

/** Keeps the inputs that are non-empty strings; the others get an `INVALID_INPUT` result. */
export function checkTexts(inputs: readonly unknown[], results: ItemResult[]): { readonly index: number; readonly value: string }[] {
  return partitionValid(
    inputs,
    (input) => {
      if (typeof input !== 'string' || input.length === 0) throw new InputError(undefined, 'Expected a non-empty string');
      return input;
    },
    results,
  );
}

/** Loads a transformers.js `feature-extraction` pipeline; the whole batch is one padded model call. */
export async function loadFeatureExtractionRunner(spec: Required<FeatureExtractionRunnerSpec>, init: WorkerInit): Promise<Runner> {
  const { id, options } = localModel(spec.model, init);
  const extractor = (await pipeline('feature-extraction', id, options)) as FeatureExtractionPipeline;
  // The pipeline pools by position: the first token is real only with right padding, the last only with left.
  extractor.tokenizer.padding_side = spec.pooling === 'last_token' ? 'left' : 'right';
  return {
    async run(inputs) {
      const results: ItemResult[] = new Array(inputs.length);
      const valid = checkTexts(inputs, results);
      if (valid.length === 0) return results;
      const output = (await extractor(
        valid.map((item) => item.value),
        { pooling: spec.pooling, normalize: spec.normalize },
      )) as Tensor;
      const vectors = output.tolist() as number[][];
      valid.forEach((item, position) => {
        results[item.index] = { ok: true, value: vectors[position] };
      });
      return results;
    },
  };
}

/** Loads a transformers.js `text-classification` pipeline; the whole batch is one padded model call. */
export async function loadTextClassificationRunner(spec: Required<TextClassificationRunnerSpec>, init: WorkerInit): Promise<Runner> {
  const { id, options } = localModel(spec.model, init);
  const classifier = (await pipeline('text-classification', id, options)) as TextClassificationPipeline;
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
