import { stat } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';

/**
 * Where {@link resolveModelDir} looks.
 *
 * @example
 * ```ts
 * await resolveModelDir('raincandy-u/TinyStories-656K', { modelsDir: '/srv/models' });
 * ```
 */
export interface ModelDirOptions {
  /**
   * What a relative `--model` path is relative to.
   * @default process.cwd()
   */
  readonly cwd?: string;
  /**
   * Where hub ids (`org/name`) are looked up, in transformers.js layout (`<modelsDir>/<org>/<name>`).
   * @default '<cwd>/models'
   */
  readonly modelsDir?: string;
}

// The files transformers.js reads first; checking them here turns a wrong path into a clear error at once, not
// into a worker's load failure.
const REQUIRED_FILES = ['config.json', 'tokenizer.json'];
const HUB_ID = /^[\w.-]+\/[\w.-]+$/;

/**
 * The absolute directory `--model` names: a local path, or a hub id that is already present under `modelsDir`.
 * Serving never downloads: anything else throws an `Error` naming the path(s) it looked at.
 *
 * @example
 * ```ts
 * await resolveModelDir('models/tinystories-656k'); // '/work/app/models/tinystories-656k'
 * ```
 */
export async function resolveModelDir(model: string, options: ModelDirOptions = {}): Promise<string> {
  if (typeof model !== 'string' || model.trim() === '') {
    throw new TypeError(`Expected \`model\` to be a non-empty string, got \`${String(model)}\` (${typeof model})`);
  }
  const cwd = options.cwd ?? process.cwd();
  const modelsDir = resolve(cwd, options.modelsDir ?? 'models');
  const candidates = [resolve(cwd, model)];
  if (HUB_ID.test(model)) candidates.push(join(modelsDir, model));
  for (const dir of candidates) {
    if (!(await isDirectory(dir))) continue;
    const missing = [];
    for (const file of REQUIRED_FILES) if (!(await isFile(join(dir, file)))) missing.push(file);
    if (missing.length > 0) {
      throw new Error(`${dir} is not a transformers.js model directory: it has no ${missing.join(' or ')}`);
    }
    return dir;
  }
  const hint = candidates.length > 1 ? ` (a hub id is looked up as ${candidates[1]}; models are never downloaded)` : '';
  throw new Error(`Model directory not found: ${candidates[0]}${hint}`);
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (stats) => stats.isDirectory(),
    () => false,
  );
}

async function isFile(path: string): Promise<boolean> {
  return stat(path).then(
    (stats) => stats.isFile(),
    () => false,
  );
}

/**
 * The queue a model is served on: the last part of `--model` (a folder or a hub id), so a worker started with
 * `--model models/tinystories-656k` and a web replica started with `--model tinystories-656k` meet.
 *
 * @example
 * ```ts
 * queueName('models/tinystories-656k/'); // 'tinystories-656k'
 * ```
 */
export function queueName(model: string): string {
  return basename(resolve(model));
}
