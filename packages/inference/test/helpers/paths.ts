import { fileURLToPath } from 'node:url';

/** The bundled model, copied into `<repo>/models` by the root `pnpm install`. */
export const TINYSTORIES_DIR = fileURLToPath(new URL('../../../../models/tinystories-656k', import.meta.url));

/** The real GPT-2 tokenizer (50,257 tokens, no weights), copied into `<repo>/models` by the root `pnpm install`. */
export const GPT2_TOKENIZER_DIR = fileURLToPath(new URL('../../../../models/gpt2-tokenizer', import.meta.url));
