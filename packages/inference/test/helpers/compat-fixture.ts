// The compatibility matrix's generated models and inputs, shared by the matrix (inference) and the CLI's
// `serve --dtype` test, so both compare against transformers.js on the same folders and texts.
import type { LlamaShape } from '@microbatch/test-kit';

/** A tiny decoder over the bundled tokenizer's 2048 ids. */
export const COMPAT_SHAPE: LlamaShape = {
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  intermediate: 128,
  vocab: 2048,
  positions: 256,
  seed: 11,
};
/** Prompts each decoder row generates from (greedy). */
export const COMPAT_PROMPTS = ['Once upon a time', 'Lily saw a big red ball under a tree and', 'Tom'];
/** Tokens each prompt generates. */
export const COMPAT_NEW_TOKENS = 6;
/** Texts each encoder row embeds. */
export const COMPAT_TEXTS = ['Hello world', 'The quick brown fox jumps over the lazy dog.', 'a'];
