// How both embedding services (`embedding-model.ts`: workers of this process; `queued-encoder-services.ts`: queue
// workers) tokenize: `tokenize` on this thread with the folder's tokenizer, `encodeAll` (what requests use) on the
// tokenizer thread, each refused with a 503 until it is loaded.
import { BatchError, ErrorCode } from '@microbatch/core';
import { type TokenizerThreads, loadTokenizer } from '@microbatch/inference';
import type { EmbeddingService } from './embedding-service.js';

/** An embedding service's tokenizing parts, and when this thread's tokenizer is loaded. */
export interface EmbeddingTokenizing extends Pick<EmbeddingService, 'tokenize' | 'encodeAll'> {
  /** Settles once this thread's tokenizer is loaded. */
  readonly loaded: Promise<void>;
  readonly isLoaded: () => boolean;
}

/**
 * Loads `dir`'s tokenizer on this thread now; `encodeAll` goes to `threads`. Before either is loaded, a call is
 * refused with `UNAVAILABLE` saying `loading`.
 *
 * @example
 * ```ts
 * const { tokenize, encodeAll, loaded } = embeddingTokenizing(dir, threads, 'The model is still loading');
 * ```
 */
export function embeddingTokenizing(dir: string, threads: TokenizerThreads, loading: string): EmbeddingTokenizing {
  let encode: ((text: string) => number[]) | undefined;
  const loaded = loadTokenizer(dir).then((one) => {
    encode = (text) => one.encode(text);
  });
  return {
    loaded,
    isLoaded: () => encode !== undefined,
    tokenize: (text) => {
      if (encode === undefined) throw new BatchError(ErrorCode.UNAVAILABLE, loading);
      return encode(text);
    },
    encodeAll: async (texts) => {
      if (!threads.isReady()) throw new BatchError(ErrorCode.UNAVAILABLE, loading);
      return (await threads.encodeAll(texts)).encodings.map((encoding) => encoding.ids);
    },
  };
}
