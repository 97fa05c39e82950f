// Where a config file's model lives: one rule for every process that reads the file (a server, a worker, a web
// replica of encoders, which needs the folder's tokenizer).
import { existsSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { resolveModelDir } from '../model-dir.js';
import type { ModelConfig } from './config-schema.js';

/**
 * The folder of the config file's model `index`: its `path` relative to the file when there, else as given (a hub
 * id under `modelsDir`, or relative to the cwd). A folder that is not a model fails, naming the file, the model and
 * the path.
 *
 * @example
 * ```ts
 * const dir = await configModelDir('models.yaml', config.models[0], 0, 'models', fail);
 * ```
 */
export async function configModelDir(
  file: string,
  model: ModelConfig,
  index: number,
  modelsDir: string | undefined,
  fail: (message: string) => never,
): Promise<string> {
  const near = isAbsolute(model.path) ? model.path : resolve(dirname(file), model.path);
  try {
    return await resolveModelDir(existsSync(near) ? near : model.path, { modelsDir });
  } catch (error) {
    return fail(
      `${file}: models[${index}].path (${model.name}): ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
