// The prefix KV cache (vLLM's automatic prefix caching, in the loop's terms): prompts' KV kept in blocks of
// `PREFIX_BLOCK_TOKENS` tokens, each keyed by a hash of its parent block's key and its own tokens (a chain), so a
// prompt's longest cached prefix is found block by block. Entries are checked against their tokens and parent, so
// a hash collision is a miss, never another prompt's KV. A newcomer copies its cached blocks into a past of its own
// (nothing it runs with points into the cache, so evicting never touches a running sequence) and prefills the rest.
//
// Partitions: every lookup and store names a salt (the tenant's, and the request's own `cache_salt`), which is the
// root of its chains: the first block's parent. A block cached under one salt is never found under another (its key
// hashes the salt, and its `parent` is checked), so one tenant's prompt never shortens another's prefill: neither
// `cached_tokens` nor the time to the first token tells a tenant anything of another's prompts.
//
// The cache is an LRU bounded in bytes. A chain is touched from its last block to its first, so a parent is always
// more recent than its children: eviction takes leaves first and never strands a reachable chain's tail.
import { kvArray } from './padded-batch.js';
import type { KvArray, KvRow, KvSource, ModelGeometry } from './padded-batch.js';

/** Tokens per cached block: a prompt's prefix is reused in whole blocks. */
export const PREFIX_BLOCK_TOKENS = 16;

/** The cache's counters, cumulative since the worker started. */
export interface PrefixCacheCounters {
  /** Newcomers whose prompt was looked up. */
  lookups: number;
  /** Newcomers that reused at least one cached block. */
  hits: number;
  /** Prompt tokens whose KV came from the cache instead of a prefill. */
  tokens: number;
  /** Blocks evicted to stay within the byte budget. */
  evictions: number;
}

interface Block {
  readonly key: string;
  readonly parent: string;
  readonly tokens: Int32Array;
  /** Every past input's KV of the block: `[input][kvHeads][PREFIX_BLOCK_TOKENS][headDim]`. */
  readonly kv: KvArray;
}

/** The key of the block after `parent` holding `tokens[from, from + PREFIX_BLOCK_TOKENS)`: two FNV-1a lanes. */
function blockKey(parent: string, tokens: readonly number[], from: number): string {
  let a = 0x811c9dc5;
  let b = 0x01000193;
  for (let index = 0; index < parent.length; index += 1) {
    a = Math.imul(a ^ parent.charCodeAt(index), 0x01000193);
    b = Math.imul(b ^ parent.charCodeAt(index), 0x5bd1e995);
  }
  for (let index = from; index < from + PREFIX_BLOCK_TOKENS; index += 1) {
    const token = tokens[index] as number;
    a = Math.imul(a ^ token, 0x01000193);
    b = Math.imul(b ^ (token + 0x9e3779b9), 0x5bd1e995);
  }
  return `${(a >>> 0).toString(36)}.${(b >>> 0).toString(36)}`;
}

/**
 * The parent of a chain's first block under `salt`: `''` for the unsalted partition (as before salts), else the salt
 * behind a prefix no block key has (block keys are base-36 digits and a dot), so a salt never equals a block's key.
 */
function rootOf(salt: string): string {
  return salt === '' ? '' : `salt:${salt}`;
}

export class PrefixCache {
  readonly #geometry: ModelGeometry;
  readonly #maxBytes: number;
  /** Floats of one past input in one block. */
  readonly #inputSize: number;
  /** Insertion order is recency: the first entry is the least recently used. */
  readonly #blocks = new Map<string, Block>();
  #bytes = 0;
  readonly counters: PrefixCacheCounters = { lookups: 0, hits: 0, tokens: 0, evictions: 0 };

  constructor(geometry: ModelGeometry, maxBytes: number) {
    this.#geometry = geometry;
    this.#maxBytes = maxBytes;
    this.#inputSize = geometry.kvHeads * PREFIX_BLOCK_TOKENS * geometry.headDim;
  }

  /** Bytes one block holds (its KV and its tokens). */
  static blockBytes(geometry: ModelGeometry): number {
    // KV elements of 4 bytes (2 for a float16 cache), and the block's token ids.
    const kvBytes = geometry.kvType === 'float16' ? 2 : 4;
    return (
      geometry.pastNames.length * geometry.kvHeads * PREFIX_BLOCK_TOKENS * geometry.headDim * kvBytes +
      PREFIX_BLOCK_TOKENS * 4
    );
  }

  /** Bytes the cached blocks hold now (never more than the budget). */
  get bytes(): number {
    return this.#bytes;
  }

  get blocks(): number {
    return this.#blocks.size;
  }

  /**
   * The cached blocks `prompt` starts with, reusable by a newcomer: at most `prompt.length - 1` tokens, so its last
   * token is always prefilled (its logits give the first generated token). No side effects.
   */
  peek(prompt: readonly number[], salt = ''): number {
    return this.#chain(prompt, salt).length;
  }

  /**
   * Looks `prompt` up for a newcomer (counted) and returns a past of its own holding the cached prefix's KV, with
   * its length in tokens; `undefined` on a miss. The blocks used become the most recent.
   */
  take(prompt: readonly number[], salt = ''): { readonly source: KvSource; readonly length: number } | undefined {
    this.counters.lookups += 1;
    const chain = this.#chain(prompt, salt);
    if (chain.length === 0) return undefined;
    this.#touch(chain);
    const length = chain.length * PREFIX_BLOCK_TOKENS;
    this.counters.hits += 1;
    this.counters.tokens += length;
    const { kvHeads, headDim } = this.#geometry;
    const span = PREFIX_BLOCK_TOKENS * headDim;
    const data = this.#geometry.pastNames.map((_, input) => {
      const into = kvArray(this.#geometry, kvHeads * length * headDim);
      chain.forEach((block, at) => {
        for (let head = 0; head < kvHeads; head += 1) {
          const from = input * this.#inputSize + head * span;
          into.set(block.kv.subarray(from, from + span), (head * length + at * PREFIX_BLOCK_TOKENS) * headDim);
        }
      });
      return into;
    });
    return { source: { data, past: length }, length };
  }

  /**
   * Keeps the whole blocks of `prompt` that are not cached yet, copied from `row` (whose KV holds the prompt from
   * position 0: `row.length >= prompt.length`), evicting the least recently used blocks to stay within the budget.
   * At most the blocks the budget holds are kept, the first ones.
   */
  store(prompt: readonly number[], row: KvRow, salt = ''): void {
    const source = row.source;
    if (source === undefined) return;
    const capacity = Math.floor(this.#maxBytes / PrefixCache.blockBytes(this.#geometry));
    const whole = Math.min(Math.floor(prompt.length / PREFIX_BLOCK_TOKENS), capacity);
    const chain: Block[] = [];
    let parent = rootOf(salt);
    for (let index = 0; index < whole; index += 1) {
      const from = index * PREFIX_BLOCK_TOKENS;
      const key = blockKey(parent, prompt, from);
      const found = this.#blocks.get(key);
      if (found !== undefined) {
        if (!this.#matches(found, parent, prompt, from)) break;
        // Most recent now, so the evictions below take other prompts' blocks before this chain's.
        this.#blocks.delete(key);
        this.#blocks.set(key, found);
        chain.push(found);
        parent = key;
        continue;
      }
      const block: Block = {
        key,
        parent,
        tokens: Int32Array.from(prompt.slice(from, from + PREFIX_BLOCK_TOKENS)),
        kv: this.#copyOut(row, source, from),
      };
      this.#evictFor(PrefixCache.blockBytes(this.#geometry));
      this.#blocks.set(key, block);
      this.#bytes += PrefixCache.blockBytes(this.#geometry);
      chain.push(block);
      parent = key;
    }
    this.#touch(chain);
  }

  /** The cached blocks that `prompt` starts with, up to `prompt.length - 1` tokens. */
  #chain(prompt: readonly number[], salt: string): Block[] {
    const chain: Block[] = [];
    const usable = Math.floor((prompt.length - 1) / PREFIX_BLOCK_TOKENS);
    let parent = rootOf(salt);
    for (let index = 0; index < usable; index += 1) {
      const from = index * PREFIX_BLOCK_TOKENS;
      const block = this.#blocks.get(blockKey(parent, prompt, from));
      if (block === undefined || !this.#matches(block, parent, prompt, from)) break;
      chain.push(block);
      parent = block.key;
    }
    return chain;
  }

  #matches(block: Block, parent: string, prompt: readonly number[], from: number): boolean {
    if (block.parent !== parent) return false;
    for (let index = 0; index < PREFIX_BLOCK_TOKENS; index += 1) {
      if (block.tokens[index] !== prompt[from + index]) return false;
    }
    return true;
  }

  /** Makes a chain the most recent, its first block last: a parent stays more recent than its children. */
  #touch(chain: readonly Block[]): void {
    for (let index = chain.length - 1; index >= 0; index -= 1) {
      const block = chain[index] as Block;
      this.#blocks.delete(block.key);
      this.#blocks.set(block.key, block);
    }
  }

  #evictFor(bytes: number): void {
    for (const [key] of this.#blocks) {
      if (this.#bytes + bytes <= this.#maxBytes) return;
      this.#blocks.delete(key);
      this.#bytes -= PrefixCache.blockBytes(this.#geometry);
      this.counters.evictions += 1;
    }
  }

  /** Copies positions `[from, from + PREFIX_BLOCK_TOKENS)` of a row's KV (right-aligned in its source). */
  #copyOut(row: KvRow, source: KvSource, from: number): KvArray {
    const { kvHeads, headDim } = this.#geometry;
    const kv = kvArray(this.#geometry, this.#geometry.pastNames.length * this.#inputSize);
    const span = PREFIX_BLOCK_TOKENS * headDim;
    const start = source.past - row.length + from;
    source.data.forEach((array, input) => {
      for (let head = 0; head < kvHeads; head += 1) {
        const at = ((row.row * kvHeads + head) * source.past + start) * headDim;
        kv.set(array.subarray(at, at + span), input * this.#inputSize + head * span);
      }
    });
    return kv;
  }
}
