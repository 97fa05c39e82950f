import { resolve } from 'node:path';
import { checkString } from '@microbatch/core/util';
import { loadLocalTokenizer } from './local-tokenizer.js';

/**
 * A model's tokenizer on the calling thread: what the HTTP side needs to count and check tokens before queueing.
 *
 * @example
 * ```ts
 * const tokenizer = await loadTokenizer('models/all-MiniLM-L6-v2');
 * tokenizer.encode('hello'); // [101, 7592, 102]
 * ```
 */
export interface Tokenizer {
  /** The text's token ids as the model reads them (special tokens added). */
  encode(text: string): number[];
}

/**
 * Loads the `tokenizer.json` of a model folder in transformers.js layout, from disk only (never the hub). Imported
 * on demand: transformers.js pulls in onnxruntime, which pool-only users never need on the main thread.
 *
 * @example
 * ```ts
 * const { encode } = await loadTokenizer(dir);
 * ```
 */
export async function loadTokenizer(model: string): Promise<Tokenizer> {
  const dir = resolve(checkString('model', model));
  let tokenizer: Awaited<ReturnType<typeof loadLocalTokenizer>>;
  try {
    tokenizer = await loadLocalTokenizer(dir);
  } catch (error) {
    throw new Error(
      `Failed to load the tokenizer from "${dir}": ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  return { encode: (text) => tokenizer.encode(text) };
}
