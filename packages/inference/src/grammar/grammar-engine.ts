// The grammar engine behind structured outputs: one per model vocabulary (a worker thread's runner holds one).
// `matcher(spec)` compiles the grammar against the vocabulary (cached in a bounded LRU per engine, so per (model,
// grammar)) and returns a `TokenMatcher` whose masks the decode loop applies row by row. Compiling is synchronous
// WASM work on the calling thread: the runner does it when a request arrives, between the loop's iterations,
// never inside a step. Any failure inside the WASM instance throws that instance away (see `xgrammar-instance.ts`).
import { InputError } from '../contract/errors.js';
import type { GrammarSpec } from '../contract/text-generation-types.js';
import { enumerateIntegerRanges } from './integer-ranges.js';
import { choiceToEbnf, regexToEbnf } from './regex-to-ebnf.js';
import type { Vocabulary } from './vocabulary.js';
import { loadXgrammar } from './xgrammar-instance.js';
import type { XgrammarInstance, XgrammarMatcherHandle } from './xgrammar-instance.js';

/** A row's grammar state: the next-token mask, fed the tokens the row samples. */
export interface TokenMatcher {
  /** The vocabulary size the masks cover (one bit per token id, 32 per word). */
  readonly vocabSize: number;
  /** Writes the allowed next tokens into `mask` (at least `ceil(vocabSize / 32)` words). */
  fillNextTokenBitmask(mask: Int32Array): void;
  /** Advances by a sampled token; false when the grammar does not allow it (the state is unchanged). */
  acceptToken(token: number): boolean;
  /** Whether the grammar accepted its stop token (the text is complete). */
  isTerminated(): boolean;
  /** Back to the grammar's start. */
  reset(): void;
  /** Frees the WASM state; the matcher is unusable after. */
  dispose(): void;
}

/** Options of {@link GrammarEngine.create}. */
export interface GrammarEngineOptions {
  readonly vocabulary: Vocabulary;
  /** The model's vocabulary size (its logits' width), at least the tokenizer's. */
  readonly vocabSize: number;
  /** The ids that end a generation (the grammar allows them once complete). */
  readonly stopTokenIds: readonly number[];
  /**
   * Compiled grammars kept per engine (least recently used dropped first).
   * @default 64
   */
  readonly cacheSize?: number;
}

/** What the engine did: for a runner's stats and the benchmark. */
export interface GrammarEngineStats {
  compiles: number;
  cacheHits: number;
  compileMs: number;
  /** WASM instances thrown away after a failure. */
  recycled: number;
}

type Compiled = Awaited<ReturnType<XgrammarInstance['api']['GrammarCompiler']['prototype']['compileJSONSchema']>>;

interface Instance {
  readonly xg: XgrammarInstance;
  readonly compiler: Awaited<ReturnType<XgrammarInstance['api']['GrammarCompiler']['createGrammarCompiler']>>;
  readonly cache: Map<string, Compiled>;
  /** Compiles under way, so requests arriving together with one new grammar compile it once. */
  readonly compiling: Map<string, Promise<Compiled>>;
}

/**
 * Compiles grammars against one vocabulary and hands out matchers.
 *
 * @example
 * ```ts
 * const engine = await GrammarEngine.create({ vocabulary: readVocabulary(dir), vocabSize: 50257, stopTokenIds: [50256] });
 * const matcher = await engine.matcher({ type: 'json', schema: { type: 'object' } });
 * ```
 */
export class GrammarEngine {
  readonly #options: GrammarEngineOptions;
  readonly #cacheSize: number;
  #instance: Instance | undefined;
  readonly stats: GrammarEngineStats = { compiles: 0, cacheHits: 0, compileMs: 0, recycled: 0 };

  private constructor(options: GrammarEngineOptions) {
    this.#options = options;
    this.#cacheSize = options.cacheSize ?? 64;
    if (!Number.isInteger(this.#cacheSize) || this.#cacheSize < 1) {
      throw new TypeError(`cacheSize must be an integer >= 1, got ${String(options.cacheSize)}`);
    }
  }

  /** Loads a WASM instance and prepares the vocabulary (about 70 ms for GPT-2's 50,257 tokens). */
  static async create(options: GrammarEngineOptions): Promise<GrammarEngine> {
    const engine = new GrammarEngine(options);
    await engine.#ready();
    return engine;
  }

  /**
   * A matcher for `spec` at its start. Throws `InputError` (field `grammar`) when the grammar does not compile or
   * when no token of the vocabulary can start it (a vocabulary that cannot spell the grammar).
   */
  async matcher(spec: GrammarSpec): Promise<TokenMatcher> {
    const instance = await this.#ready();
    const compiled = await this.#compile(instance, spec);
    const { vocabSize, stopTokenIds } = this.#options;
    let handle: XgrammarMatcherHandle;
    try {
      const binding = instance.xg.binding();
      const stops = binding.vecIntFromJSArray(stopTokenIds);
      handle = new binding.GrammarMatcher(compiled.handle, stops, false, -1);
      stops.delete();
    } catch (error) {
      this.#recycle();
      throw error;
    }
    const matcher = new XgrammarMatcher(instance.xg, handle, vocabSize);
    const mask = new Int32Array(Math.ceil(vocabSize / 32));
    matcher.fillNextTokenBitmask(mask);
    const stops = new Set(stopTokenIds);
    let startable = false;
    for (let id = 0; id < vocabSize && !startable; id += 1) {
      if (!stops.has(id) && ((mask[id >> 5] as number) >>> (id & 31)) & 1) startable = true;
    }
    if (!startable) {
      matcher.dispose();
      throw new InputError('grammar', "the model's vocabulary cannot spell this grammar: no token can start it");
    }
    return matcher;
  }

  async #ready(): Promise<Instance> {
    if (this.#instance !== undefined) return this.#instance;
    const xg = loadXgrammar();
    const { tokens, type, prependSpace } = this.#options.vocabulary;
    const { vocabSize, stopTokenIds } = this.#options;
    const info = await xg.api.TokenizerInfo.createTokenizerInfo(
      [...tokens],
      type,
      prependSpace,
      Math.max(vocabSize, tokens.length),
      [...stopTokenIds],
    );
    const compiler = await xg.api.GrammarCompiler.createGrammarCompiler(info, false);
    this.#instance = { xg, compiler, cache: new Map(), compiling: new Map() };
    return this.#instance;
  }

  /** Throws the instance away after a failure inside it; the next call loads a new one. */
  #recycle(): void {
    this.#instance = undefined;
    this.stats.recycled += 1;
  }

  async #compile(instance: Instance, spec: GrammarSpec): Promise<Compiled> {
    const key = JSON.stringify(spec);
    const cached = instance.cache.get(key);
    if (cached !== undefined) {
      this.stats.cacheHits += 1;
      instance.cache.delete(key);
      instance.cache.set(key, cached);
      return cached;
    }
    const pending = instance.compiling.get(key);
    if (pending !== undefined) {
      this.stats.cacheHits += 1;
      return pending;
    }
    const compiling = this.#compileNew(instance, spec, key);
    instance.compiling.set(key, compiling);
    try {
      return await compiling;
    } finally {
      instance.compiling.delete(key);
    }
  }

  async #compileNew(instance: Instance, spec: GrammarSpec, key: string): Promise<Compiled> {
    let source: string | undefined;
    if (spec.type === 'regex' || spec.type === 'choice') {
      try {
        source = spec.type === 'regex' ? regexToEbnf(spec.pattern) : choiceToEbnf(spec.choices);
      } catch (error) {
        throw new InputError('grammar', `invalid regex: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    const started = performance.now();
    let compiled: Compiled;
    try {
      const { compiler } = instance;
      compiled =
        source !== undefined
          ? await compiler.compileGrammar(source)
          : spec.type === 'json' && spec.schema !== undefined
            ? await compiler.compileJSONSchema(
                JSON.stringify(enumerateIntegerRanges(spec.schema)),
                false,
                -1,
                [', ', ': '],
                true,
              )
            : await compiler.compileGrammar(JSON_OBJECT_EBNF);
    } catch {
      // The instance aborted: never reused. The grammar is the request's problem (the checks before it passed it).
      this.#recycle();
      throw new InputError('grammar', 'the grammar could not be compiled');
    }
    this.stats.compiles += 1;
    this.stats.compileMs += performance.now() - started;
    instance.cache.set(key, compiled);
    if (instance.cache.size > this.#cacheSize) {
      const [oldest, value] = instance.cache.entries().next().value as [string, Compiled];
      instance.cache.delete(oldest);
      value.dispose();
    }
    return compiled;
  }
}

/**
 * OpenAI's JSON mode: any JSON object (whitespace bounded so a weak model cannot pad forever), in XGrammar's EBNF.
 */
const JSON_OBJECT_EBNF = String.raw`
root ::= object
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4,4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )?
ws ::= [ \n\t]{0,2}
`;

class XgrammarMatcher implements TokenMatcher {
  readonly #xg: XgrammarInstance;
  readonly #handle: XgrammarMatcherHandle;
  readonly vocabSize: number;

  constructor(xg: XgrammarInstance, handle: XgrammarMatcherHandle, vocabSize: number) {
    this.#xg = xg;
    this.#handle = handle;
    this.vocabSize = vocabSize;
  }

  fillNextTokenBitmask(mask: Int32Array): void {
    const vector = this.#handle.GetNextTokenBitmask(this.vocabSize);
    try {
      mask.set(this.#xg.binding().vecIntToView(vector));
    } finally {
      vector.delete();
    }
  }

  acceptToken(token: number): boolean {
    return this.#handle.AcceptToken(token, false);
  }

  isTerminated(): boolean {
    return this.#handle.IsTerminated();
  }

  reset(): void {
    this.#handle.Reset();
  }

  dispose(): void {
    this.#handle.delete();
  }
}

/**
 * Sets the logits of the tokens `mask` does not allow to -Infinity; returns how many are allowed (0: the grammar
 * is at a dead end for this vocabulary).
 */
export function applyTokenMask(logits: Float32Array, mask: Int32Array): number {
  let allowed = 0;
  const size = logits.length;
  for (let word = 0; word * 32 < size; word += 1) {
    const bits = mask[word] as number;
    const base = word * 32;
    const end = Math.min(32, size - base);
    if (bits === -1 && end === 32) {
      allowed += 32;
      continue;
    }
    for (let bit = 0; bit < end; bit += 1) {
      if ((bits >>> bit) & 1) allowed += 1;
      else logits[base + bit] = Number.NEGATIVE_INFINITY;
    }
  }
  return allowed;
}
