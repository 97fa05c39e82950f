import type { RequestListener } from 'node:http';
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ListenOptions, type RunningServer, startServer } from './serve.js';
import { type TextCompletionModel, createTextCompletionModel } from '../service/text-completion-model.js';
import type { TextCompletionModelOptions } from '../service/text-completion-options.js';

/**
 * Where to listen and which model to serve, with its batching options.
 *
 * @example
 * ```ts
 * const options: TextCompletionServerOptions = { port: 8000, host: '127.0.0.1', model: bundledModelDir(), maxSequences: 16 };
 * ```
 */
export type TextCompletionServerOptions = ListenOptions & TextCompletionModelOptions;

/**
 * Starts a text-completion model and an HTTP server for the app `createListener` builds on it (an Express app, a
 * Koa `app.callback()`). It listens at once, while the model loads; its `shutdown` stops accepting, drains the
 * model's batchers, waits for the responses, then stops the workers.
 *
 * @example
 * ```ts
 * const running = await startTextCompletionServer({ port: 0, host: '127.0.0.1', model }, (model) => createApp(model));
 * ```
 */
export async function startTextCompletionServer(
  options: TextCompletionServerOptions,
  createListener: (model: TextCompletionModel) => RequestListener,
): Promise<RunningServer> {
  const { port, host, ...modelOptions } = options;
  const model = createTextCompletionModel(modelOptions);
  return startServer(
    createListener(model),
    { port, host },
    { ready: model.ready, drain: model.drain, close: model.close },
  );
}

/**
 * The model `pnpm install` places in this repository's `models/` folder (`models/tinystories-656k`), which the
 * examples and `pnpm start` serve unless `MODEL_DIR` says otherwise. Throws an `Error` saying what to pass instead
 * where the folder is not there (the package installed outside the repository).
 *
 * @example
 * ```ts
 * const model = process.env.MODEL_DIR ?? bundledModelDir();
 * ```
 */
export function bundledModelDir(): string {
  // The repository's models/ is two folders above the package: reached from src/app/ (tests, tsx) and from dist/
  // or its chunks alike. Installed from npm, the folder does not exist.
  const dir = join(packageRoot(fileURLToPath(import.meta.url)), '..', '..', 'models', 'tinystories-656k');
  if (!existsSync(join(dir, 'config.json'))) {
    throw new Error(
      `The bundled model is not at ${dir}: it ships only with the microbatch repository (placed by its \`pnpm install\`). ` +
        'Pass a model folder in transformers.js layout instead (`--model <dir>`, `MODEL_DIR`, or the `model` option).',
    );
  }
  return dir;
}

/** The package's folder: the parent of the `src` or `dist` folder that `file` is under (at most a few levels). */
function packageRoot(file: string): string {
  let dir = dirname(file);
  for (let depth = 0; depth < 4 && basename(dir) !== 'src' && basename(dir) !== 'dist'; depth += 1) dir = dirname(dir);
  return dirname(dir);
}
