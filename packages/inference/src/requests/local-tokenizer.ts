// The one way the main thread loads a model folder's tokenizer with transformers.js. Its folder is read through
// the library's global `env.localModelPath`, so two loads at once (several models starting in one process) could
// each read the other's folder: loads go one at a time, each setting the path just before it reads.
import { basename, dirname, sep } from 'node:path';
import type { AutoTokenizer } from '@huggingface/transformers';

type LoadedTokenizer = Awaited<ReturnType<(typeof AutoTokenizer)['from_pretrained']>>;

let queue: Promise<unknown> = Promise.resolve();

/**
 * The tokenizer of the model folder `dir` (absolute), from disk only (never the hub), loaded after every earlier
 * load of this thread has ended. Throws transformers.js' own error; callers name the folder.
 *
 * @example
 * ```ts
 * const tokenizer = await loadLocalTokenizer('/abs/models/tinystories-656k');
 * ```
 */
export function loadLocalTokenizer(dir: string): Promise<LoadedTokenizer> {
  const load = queue.then(async () => {
    // Imported here, not at the top: transformers.js pulls in onnxruntime, which pool-only users never need on
    // the main thread.
    const { AutoTokenizer, env } = await import('@huggingface/transformers');
    env.allowRemoteModels = false;
    env.localModelPath = dirname(dir) + sep;
    return AutoTokenizer.from_pretrained(basename(dir));
  });
  queue = load.catch(() => undefined);
  return load;
}
