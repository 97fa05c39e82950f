// Local-only loading of transformers.js model folders, for every runner that reads one.
import { existsSync } from 'node:fs';
import { basename, dirname, join, sep } from 'node:path';
import { env } from '@huggingface/transformers';
import type { WorkerInit } from '../contract/messages.js';

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
  if (missing.length > 0)
    throw new Error(`missing ${missing.join(', ')} (expected a transformers.js model folder, fp32)`);
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
