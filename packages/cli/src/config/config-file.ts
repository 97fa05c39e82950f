// Reading a `microbatch serve --config` file (YAML, or JSON, which the same parser reads): every problem is an error
// naming the file, the line and the key (`models.yaml:7: models[1].task: must be one of ...`), found before anything
// starts. The keys and their checks are `config-schema.ts`'s table.
import { readFile } from 'node:fs/promises';
import {
  SCHEDULING_RULES,
  type SchedulingSetting,
  TEXT_GENERATION_DEFAULTS,
  schedulingRefusal,
} from '@microbatch/inference';
import { type Document, LineCounter, isMap, isScalar, parseDocument } from 'yaml';
import { CONFIG_KEYS, MODEL_KEYS, type ModelConfig, type ServeConfig } from './config-schema.js';

/** A path into the file: keys and list indexes. */
type Path = readonly (string | number)[];

/** `models[1].task`, as errors name a place in the file. */
export function pathName(path: Path): string {
  return path.map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? part : `.${part}`)).join('');
}

/** Where things are in the parsed file: the line of a key, or of a value when the key is not there. */
class Locator {
  readonly #doc: Document;
  readonly #lines: LineCounter;
  readonly #file: string;
  constructor(doc: Document, lines: LineCounter, file: string) {
    this.#doc = doc;
    this.#lines = lines;
    this.#file = file;
  }

  /** `file:line: path: problem`, the line of `path`'s key (or of the nearest enclosing node found). */
  error(path: Path, problem: string): Error {
    const where = pathName(path);
    return new Error(`${this.#file}:${this.#lineOf(path)}: ${where === '' ? '' : `${where}: `}${problem}`);
  }

  #lineOf(path: Path): number {
    for (let depth = path.length; depth >= 0; depth -= 1) {
      const offset = this.#offsetOf(path.slice(0, depth));
      if (offset !== undefined) return this.#lines.linePos(offset).line;
    }
    return 1;
  }

  #offsetOf(path: Path): number | undefined {
    if (path.length === 0) return (this.#doc.contents as { range?: [number] } | null)?.range?.[0];
    const parent = path.length === 1 ? this.#doc.contents : this.#doc.getIn(path.slice(0, -1), true);
    const last = path.at(-1);
    if (isMap(parent)) {
      const pair = parent.items.find((item) => isScalar(item.key) && item.key.value === last);
      return (pair?.key as { range?: [number] } | undefined)?.range?.[0];
    }
    const node = this.#doc.getIn(path, true) as { range?: [number] } | undefined;
    return node?.range?.[0];
  }
}

/**
 * Reads and checks a config file: top-level keys, each model's keys (unknown ones, missing ones, values, keys of
 * another task, settings the model's scheduling refuses, the step budget), unique names, and no more eager models
 * than `maxLoadedModels`. Paths are not resolved here (see `config-models.ts`). Throws an `Error` naming the file,
 * the line and the key.
 *
 * @example
 * ```ts
 * const config = await readServeConfig('models.yaml');
 * ```
 */
export async function readServeConfig(file: string): Promise<ServeConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new Error(`${file}: cannot read the config file (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  return parseServeConfig(text, file);
}

/**
 * Checks a config file's text (see {@link readServeConfig}); `file` names it in errors.
 *
 * @example
 * ```ts
 * parseServeConfig('models:\n  - { name: chat, path: models/tinystories-656k, task: text-generation }\n', 'x.yaml');
 * ```
 */
export function parseServeConfig(text: string, file: string): ServeConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  const [syntax] = doc.errors;
  if (syntax !== undefined) {
    const line = lines.linePos(syntax.pos[0]).line;
    throw new Error(`${file}:${line}: not valid YAML or JSON: ${syntax.message.split('\n')[0]}`);
  }
  const at = new Locator(doc, lines, file);
  const root: unknown = doc.toJS();
  if (typeof root !== 'object' || root === null || Array.isArray(root)) {
    throw at.error([], 'the config must be a mapping with a `models` list');
  }
  checkKeys(root as Record<string, unknown>, CONFIG_KEYS, [], at, 'top-level');
  const config = root as ServeConfig;
  const names = new Map<string, number>();
  config.models.forEach((model: unknown, index) => {
    const path = ['models', index];
    if (typeof model !== 'object' || model === null || Array.isArray(model)) {
      throw at.error(path, 'each model must be a mapping (name, path, task, ...)');
    }
    checkKeys(model as Record<string, unknown>, MODEL_KEYS, path, at, 'model');
    const checked = model as ModelConfig;
    const first = names.get(checked.name);
    if (first !== undefined) {
      throw at.error(
        [...path, 'name'],
        `duplicate model name ${JSON.stringify(checked.name)} (models[${first}] has it)`,
      );
    }
    names.set(checked.name, index);
    checkTaskKeys(checked, path, at);
  });
  const eager = config.models.filter((model) => (model.load ?? defaultLoad(config)) === 'eager');
  if (config.maxLoadedModels !== undefined && eager.length > config.maxLoadedModels) {
    throw at.error(
      ['maxLoadedModels'],
      `${eager.length} models load eagerly (${eager.map((model) => model.name).join(', ')}) but at most ` +
        `${config.maxLoadedModels} may be loaded: make some \`load: lazy\``,
    );
  }
  return config;
}

/** A model's `load` when it does not say: eager, unless `maxLoadedModels` bounds them (then lazy). */
export function defaultLoad(config: Pick<ServeConfig, 'maxLoadedModels'>): 'eager' | 'lazy' {
  return config.maxLoadedModels === undefined ? 'eager' : 'lazy';
}

function checkKeys(
  value: Record<string, unknown>,
  rules: Readonly<Record<string, { readonly check: (value: unknown) => string | undefined; readonly required?: true }>>,
  path: Path,
  at: Locator,
  what: string,
): void {
  for (const key of Object.keys(value)) {
    const rule = rules[key];
    if (rule === undefined) {
      throw at.error([...path, key], `unknown ${what} key \`${key}\` (known: ${Object.keys(rules).join(', ')})`);
    }
    const problem = rule.check(value[key]);
    if (problem !== undefined) throw at.error([...path, key], `${problem}, got ${JSON.stringify(value[key])}`);
  }
  for (const [key, rule] of Object.entries(rules)) {
    if (rule.required === true && !(key in value)) throw at.error(path, `the ${what} key \`${key}\` is missing`);
  }
}

/** Keys of another task, settings the model's scheduling refuses (inference's `SCHEDULING_RULES`), the step budget. */
function checkTaskKeys(model: ModelConfig, path: Path, at: Locator): void {
  for (const key of Object.keys(model) as (keyof ModelConfig)[]) {
    const tasks = MODEL_KEYS[key].tasks;
    if (tasks !== undefined && !tasks.includes(model.task)) {
      throw at.error([...path, key], `\`${key}\` does not apply to task ${model.task} (only to ${tasks.join(', ')})`);
    }
  }
  // Embeddings have no decode loop: their batches are the batcher's, as under request scheduling.
  const scheduling = model.task === 'text-generation' ? (model.scheduling ?? 'continuous') : 'request';
  for (const key of Object.keys(model)) {
    if (!Object.hasOwn(SCHEDULING_RULES, key)) continue;
    const setting = key as SchedulingSetting;
    const value = (model as unknown as Record<string, unknown>)[key];
    if (value === SCHEDULING_RULES[setting].continuousValue) continue;
    const why = schedulingRefusal(setting, `serve ${scheduling}`, (other) => `\`${other}\``);
    if (why !== undefined) throw at.error([...path, key], `has no effect with ${scheduling} scheduling: ${why}`);
  }
  const rows = model.maxSequences ?? TEXT_GENERATION_DEFAULTS.maxSequences;
  if (model.maxStepTokens !== undefined && model.maxStepTokens <= rows) {
    throw at.error(
      [...path, 'maxStepTokens'],
      `must exceed maxSequences (${rows}): a step decodes every running row and needs room for a prompt token`,
    );
  }
}
