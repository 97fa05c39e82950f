// The steps the serve and worker commands take the same way: `--model` resolved to its folder, and a constructor's
// or loader's error turned into the command's failure (its message printed, exit 1) rather than a stack trace.
import { resolveModelDir } from './model-dir.js';

/**
 * `run()`'s value, or `fail` with the message of what it threw.
 *
 * @example
 * ```ts
 * const service = failOnThrow(() => createSequenceClassifier({ model, task }), fail);
 * ```
 */
export function failOnThrow<T>(run: () => T, fail: (message: string) => never): T {
  try {
    return run();
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
}

/**
 * The folder `--model` names (under `--models-dir` for a hub id), or `fail` saying why there is none.
 *
 * @example
 * ```ts
 * const model = await modelDirOrFail(flags, fail); // '/work/app/models/tinystories-656k'
 * ```
 */
export async function modelDirOrFail(
  flags: { readonly model: string; readonly modelsDir?: string | undefined },
  fail: (message: string) => never,
): Promise<string> {
  try {
    return await resolveModelDir(flags.model, { modelsDir: flags.modelsDir });
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
}
