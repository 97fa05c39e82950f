// A model's vocabulary as XGrammar reads it, from the model folder's `tokenizer.json`: the encoded token strings by
// id and how they decode (`byte_level`: GPT-2-style bytes mapped to printable characters; `byte_fallback`:
// SentencePiece with `<0xAB>` byte tokens and `▁` for spaces; `raw`: the strings as they are).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What XGrammar needs to know of a tokenizer. */
export interface Vocabulary {
  /** Encoded token strings, indexed by id (ids with no token are empty strings). */
  readonly tokens: readonly string[];
  readonly type: 'byte_level' | 'byte_fallback' | 'raw';
  /** Whether the tokenizer prepends a space (`▁`) to the text it encodes (SentencePiece). */
  readonly prependSpace: boolean;
}

interface TokenizerJson {
  readonly model?: { readonly vocab?: unknown; readonly byte_fallback?: boolean };
  readonly added_tokens?: readonly { readonly id: number; readonly content: string }[];
  readonly decoder?: unknown;
  readonly normalizer?: unknown;
  readonly pre_tokenizer?: unknown;
}

/** Every `type` of a tokenizer.json component, nested sequences included. */
function typesOf(component: unknown): string[] {
  if (typeof component !== 'object' || component === null) return [];
  const record = component as Record<string, unknown>;
  const own = typeof record.type === 'string' ? [record.type] : [];
  const nested = [record.decoders, record.normalizers, record.pretokenizers].flatMap((list) =>
    Array.isArray(list) ? list.flatMap(typesOf) : [],
  );
  return [...own, ...nested];
}

/**
 * Reads `<model>/tokenizer.json` (a BPE / Unigram / WordPiece vocabulary in Hugging Face's format).
 *
 * @example
 * ```ts
 * const { tokens, type } = readVocabulary('models/gpt2-tokenizer'); // 50257 tokens, 'byte_level'
 * ```
 */
export function readVocabulary(model: string): Vocabulary {
  const json = JSON.parse(readFileSync(join(model, 'tokenizer.json'), 'utf8')) as TokenizerJson;
  const vocab = json.model?.vocab;
  const tokens: string[] = [];
  if (Array.isArray(vocab)) {
    // Unigram: [token, score] pairs in id order.
    vocab.forEach((entry, id) => {
      tokens[id] = Array.isArray(entry) ? String(entry[0]) : String(entry);
    });
  } else if (typeof vocab === 'object' && vocab !== null) {
    for (const [token, id] of Object.entries(vocab)) if (typeof id === 'number') tokens[id] = token;
  } else {
    throw new Error(`${join(model, 'tokenizer.json')} has no \`model.vocab\``);
  }
  for (const added of json.added_tokens ?? []) tokens[added.id] = added.content;
  for (let id = 0; id < tokens.length; id += 1) tokens[id] ??= '';
  const decoders = typesOf(json.decoder);
  const type = decoders.includes('ByteLevel')
    ? 'byte_level'
    : decoders.includes('ByteFallback') || json.model?.byte_fallback === true
      ? 'byte_fallback'
      : 'raw';
  const normalizers = [...typesOf(json.normalizer), ...typesOf(json.pre_tokenizer)];
  const prependSpace = normalizers.includes('Prepend') || normalizers.includes('Metaspace');
  return { tokens, type, prependSpace };
}
