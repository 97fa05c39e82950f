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
  /**
   * A text pair's token ids and segment ids as a cross-encoder reads them (`[CLS] a [SEP] b [SEP]`, segments 0 then
   * 1 for BERT), the same as transformers.js's `tokenizer(a, { text_pair: b })`.
   */
  encodePair(text: string, pair: string): { readonly ids: number[]; readonly typeIds: number[] };
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
  return {
    encode: (text) => tokenizer.encode(text),
    encodePair: (text, pair) => {
      // `_encode_plus` is what transformers.js's own `tokenizer(text, { text_pair })` calls per text.
      const encoded = (
        tokenizer as unknown as {
          _encode_plus(
            text: string,
            options: { text_pair: string; return_token_type_ids: boolean },
          ): { input_ids: number[]; token_type_ids?: number[] };
        }
      )._encode_plus(text, { text_pair: pair, return_token_type_ids: true });
      const ids = encoded.input_ids;
      return { ids, typeIds: encoded.token_type_ids ?? ids.map(() => 0) };
    },
  };
}
