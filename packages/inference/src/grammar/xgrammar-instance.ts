// One XGrammar WebAssembly instance. `@mlc-ai/web-xgrammar` is a CommonJS (UMD) bundle whose package.json says ESM,
// so Node's ESM loader cannot import it; it is evaluated here as CommonJS through `node:module`, afresh for each
// instance: an error inside the WASM code aborts that instance and may leave it unusable, so the engine throws an
// instance away after any failure and loads a new one (`grammar-engine.ts`). The bundle keeps its binding in a
// closure; one line appended to its source exposes it, so masks can be read synchronously (its own
// `getNextTokenBitmask` is async and copies twice) and matchers built without leaking a tokenizer handle per
// matcher.
import { readFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import type * as Xgrammar from '@mlc-ai/web-xgrammar';

/** The embind handles this module uses (the bundle ships no types for them). */
export interface XgrammarBinding {
  vecIntFromJSArray(values: readonly number[]): { delete(): void };
  vecIntToView(vector: unknown): Int32Array;
  GrammarMatcher: new (
    compiled: unknown,
    stopTokens: unknown,
    terminateWithoutStop: boolean,
    maxRollback: number,
  ) => XgrammarMatcherHandle;
}

/** The embind matcher's methods this module calls. */
export interface XgrammarMatcherHandle {
  GetNextTokenBitmask(vocabSize: number): { delete(): void };
  AcceptToken(token: number, verbose: boolean): boolean;
  IsTerminated(): boolean;
  Reset(): void;
  delete(): void;
}

/** The bundle's classes (typed by the package) and its binding. */
export interface XgrammarInstance {
  readonly api: typeof Xgrammar;
  /** The embind module, once the instance's first call awaited its initialization. */
  binding(): XgrammarBinding;
}

const ANCHOR = "Object.defineProperty(exports, '__esModule', { value: true });";
const EXPOSE = `${ANCHOR}\n  exports.__binding = () => binding;`;

let source: { readonly file: string; readonly text: string } | undefined;

function bundleSource(): { readonly file: string; readonly text: string } {
  if (source !== undefined) return source;
  const file = createRequire(import.meta.url).resolve('@mlc-ai/web-xgrammar');
  const text = readFileSync(file, 'utf8');
  if (text.split(ANCHOR).length !== 2) {
    throw new Error(`@mlc-ai/web-xgrammar's bundle (${file}) is not the layout this module patches: pin 0.1.27`);
  }
  source = { file, text: text.replace(ANCHOR, EXPOSE) };
  return source;
}

/** Evaluates a new instance of the bundle (its own WASM memory and binding). */
export function loadXgrammar(): XgrammarInstance {
  const { file, text } = bundleSource();
  const module = new Module(file) as Module & { _compile(code: string, name: string): void; paths: string[] };
  module.filename = file;
  module.paths = (Module as unknown as { _nodeModulePaths(dir: string): string[] })._nodeModulePaths(file);
  module._compile(text, file);
  const exports = module.exports as typeof Xgrammar & { __binding(): XgrammarBinding | null };
  return {
    api: exports,
    binding: () => {
      const binding = exports.__binding();
      if (binding === null) throw new Error('the XGrammar instance is not initialized yet');
      return binding;
    },
  };
}
