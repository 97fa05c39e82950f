// Local-only loading of transformers.js model folders, for every runner that reads one.
import { existsSync } from 'node:fs';
import { basename, dirname, join, sep } from 'node:path';
import { env } from '@huggingface/transformers';
import type { WorkerInit } from '../contract/messages.js';
import type { ModelDtype } from '../spec/model-dtypes.js';
import { resolveModelFile } from './model-files.js';
import type { ModelFile } from './model-files.js';

/** The files every transformers.js model folder has besides its ONNX graph. */
const FOLDER_FILES = ['config.json', 'tokenizer.json'];

/** What `from_pretrained` needs to load a local model folder with the worker's device and threads. */
export interface LocalModel {
  /** The folder name, resolved by transformers.js against `env.localModelPath`. */
  readonly id: string;
  /** The graph the runner's dtype picked: the file transformers.js loads with `options`. */
  readonly file: ModelFile;
  readonly options: {
    readonly dtype: ModelDtype;
    /** The graph's name (`model`, `decoder_model_merged`), so transformers.js opens the same file. */
    readonly model_file_name: string;
    readonly device: 'cpu';
    readonly session_options: Record<string, unknown>;
  };
}

/**
 * Points transformers.js at the model's parent folder and forbids the hub, so a missing file fails at once
 * instead of being fetched, and picks the graph of `dtype` among `graphs` (`model-files.ts`). One worker hosts one
 * model, so setting the global `env` here is safe.
 */
export function localModel(
  modelDir: string,
  init: WorkerInit,
  dtype: 'auto' | ModelDtype,
  graphs: readonly string[],
): LocalModel {
  // transformers.js reports a missing folder as an unrelated TypeError; name the missing files instead.
  const missing = FOLDER_FILES.filter((file) => !existsSync(join(modelDir, file)));
  if (missing.length > 0) throw new Error(`missing ${missing.join(', ')} (expected a transformers.js model folder)`);
  const file = resolveModelFile(modelDir, dtype, graphs);
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = dirname(modelDir) + sep;
  return {
    id: basename(modelDir),
    file,
    options: {
      dtype: file.dtype,
      model_file_name: file.graph,
      // transformers.js takes the provider as its `device`; only the names it knows are accepted, so an
      // unsupported provider fails the load with its own message.
      device: init.executionProvider as 'cpu',
      session_options: { intraOpNumThreads: init.threads, interOpNumThreads: 1 },
    },
  };
}
