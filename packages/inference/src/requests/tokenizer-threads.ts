// A model's tokenizer on threads of its own, so that tokenizing a large request never holds the main thread (its
// HTTP routes, probes and admission). Each thread runs `@huggingface/tokenizers` (what transformers.js's own
// tokenizers wrap) on the folder's `tokenizer.json` and `tokenizer_config.json`: the ids are transformers.js's.
// Texts cross the thread boundary as strings; ids come back as one transferred typed array per request.
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { checkInteger, checkString } from '@microbatch/core/util';

/**
 * One tokenized text or pair: its ids (special tokens included) and segment ids (0, and 1 for a pair's second part).
 *
 * @example
 * ```ts
 * const [{ ids, typeIds }] = await threads.encodeAll(['hello']);
 * ```
 */
export interface ThreadEncoding {
  readonly ids: number[];
  readonly typeIds: number[];
}

/**
 * What {@link TokenizerThreads.encodeAll} answers: every encoding, or, when the request's tokens passed `maxTotal`,
 * those up to the first past it (`stoppedAt`: its index; nothing after it was tokenized).
 */
export interface ThreadEncodings {
  readonly encodings: ThreadEncoding[];
  readonly stoppedAt: number | undefined;
}

/**
 * A model's tokenizer on worker threads of its own.
 *
 * @example
 * ```ts
 * const threads = createTokenizerThreads('models/ms-marco-MiniLM-L-6-v2');
 * await threads.ready;
 * const { encodings } = await threads.encodeAll(['query'], { pairs: ['document'] });
 * ```
 */
export interface TokenizerThreads {
  /** Resolves once every thread has loaded the tokenizer; rejects with why one could not. */
  readonly ready: Promise<void>;
  isReady(): boolean;
  /**
   * Tokenizes `texts` (with `pairs`, each text with its pair) on one of the threads, in order, stopping at the first
   * text that takes the total past `maxTotal` tokens.
   */
  encodeAll(
    texts: readonly string[],
    options?: { readonly pairs?: readonly string[]; readonly maxTotal?: number },
  ): Promise<ThreadEncodings>;
  close(): Promise<void>;
}

/** The thread's code, CommonJS (an `eval` worker): no build entry of its own, the tokenizers package by path. */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { readFileSync, existsSync } = require('node:fs');
const { join } = require('node:path');
const { Tokenizer } = require(workerData.tokenizers);
const read = (file) => JSON.parse(readFileSync(join(workerData.dir, file), 'utf8'));
const config = existsSync(join(workerData.dir, 'tokenizer_config.json')) ? read('tokenizer_config.json') : {};
const tokenizer = new Tokenizer(read('tokenizer.json'), config);
parentPort.on('message', ({ id, texts, pairs, maxTotal }) => {
  try {
    const ids = [];
    const types = [];
    const ends = [];
    let stoppedAt = -1;
    for (let i = 0; i < texts.length; i += 1) {
      const encoded = tokenizer.encode(texts[i], {
        text_pair: pairs === undefined ? null : pairs[i],
        return_token_type_ids: true,
      });
      for (const token of encoded.ids) ids.push(token);
      const segments = encoded.token_type_ids;
      for (let t = 0; t < encoded.ids.length; t += 1) types.push(segments === undefined ? 0 : segments[t]);
      ends.push(ids.length);
      if (ids.length > maxTotal) {
        stoppedAt = i;
        break;
      }
    }
    const idArray = Int32Array.from(ids);
    const typeArray = Uint8Array.from(types);
    const endArray = Int32Array.from(ends);
    parentPort.postMessage({ id, ids: idArray, types: typeArray, ends: endArray, stoppedAt }, [
      idArray.buffer,
      typeArray.buffer,
      endArray.buffer,
    ]);
  } catch (error) {
    parentPort.postMessage({ id, error: String((error && error.message) || error) });
  }
});
parentPort.postMessage({ ready: true });
`;

interface Reply {
  readonly id?: number;
  readonly ready?: true;
  readonly error?: string;
  readonly ids?: Int32Array;
  readonly types?: Uint8Array;
  readonly ends?: Int32Array;
  readonly stoppedAt?: number;
}

/** The `@huggingface/tokenizers` transformers.js itself loads (its dependency, resolved from it). */
function tokenizersPath(): string {
  const require = createRequire(import.meta.url);
  return createRequire(require.resolve('@huggingface/transformers')).resolve('@huggingface/tokenizers');
}

/**
 * Starts `threads` worker threads that each load the tokenizer of the model folder `model` (`tokenizer.json`,
 * `tokenizer_config.json`); requests go to them in turn. A thread that fails or exits fails the pending requests and
 * every later one with an `Error` (the caller answers 500; the service is no longer ready), and `ready` rejects if
 * one cannot load.
 *
 * @example
 * ```ts
 * const threads = createTokenizerThreads(dir, { threads: 1 });
 * ```
 */
export function createTokenizerThreads(model: string, options: { readonly threads?: number } = {}): TokenizerThreads {
  const dir = resolve(checkString('model', model));
  const count = checkInteger('threads', options.threads ?? 1, 1);
  const tokenizers = tokenizersPath();
  const pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  let turn = 0;
  let loaded = 0;
  let closed = false;
  // Set when a thread fails or exits: from then on every request is refused at once rather than posted to it.
  let failure: Error | undefined;
  const workers = Array.from({ length: count }, () => {
    const worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { dir, tokenizers } });
    worker.unref();
    return worker;
  });
  const ready = Promise.all(
    workers.map(
      (worker) =>
        new Promise<void>((resolveReady, rejectReady) => {
          let started = false;
          worker.on('message', (reply: Reply) => {
            if (reply.ready === true) {
              started = true;
              loaded += 1;
              resolveReady();
              return;
            }
            const waiter = reply.id === undefined ? undefined : pending.get(reply.id);
            if (waiter === undefined) return;
            pending.delete(reply.id as number);
            if (reply.error !== undefined) waiter.reject(new Error(`Tokenizing failed: ${reply.error}`));
            else waiter.resolve(reply);
          });
          const fail = (error: Error) => {
            // Before it is ready a thread fails loading the folder: said as the main-thread loader says it.
            failure ??= new Error(
              started
                ? `The tokenizer thread of "${dir}" failed: ${error.message}`
                : `Failed to load the tokenizer from "${dir}": ${error.message}`,
              { cause: error },
            );
            rejectReady(failure);
            for (const [id, waiter] of pending) {
              pending.delete(id);
              waiter.reject(new Error('The tokenizer thread stopped'));
            }
          };
          worker.on('error', fail);
          worker.on('exit', (code) => {
            if (!closed) fail(new Error(`exited with code ${code}`));
          });
        }),
    ),
  ).then(() => undefined);
  ready.catch(() => undefined);
  return {
    ready,
    isReady: () => loaded === count && !closed && failure === undefined,
    encodeAll(texts, { pairs, maxTotal = Number.MAX_SAFE_INTEGER } = {}) {
      if (closed) return Promise.reject(new Error('The tokenizer threads are closed'));
      if (failure !== undefined) return Promise.reject(failure);
      const id = nextId++;
      const worker = workers[turn++ % count] as Worker;
      return new Promise<Reply>((resolveReply, rejectReply) => {
        pending.set(id, { resolve: resolveReply, reject: rejectReply });
        worker.postMessage({ id, texts, pairs, maxTotal });
      }).then((reply) => {
        const ids = reply.ids as Int32Array;
        const types = reply.types as Uint8Array;
        const ends = reply.ends as Int32Array;
        const encodings: ThreadEncoding[] = [];
        let start = 0;
        for (const end of ends) {
          encodings.push({
            ids: Array.from(ids.subarray(start, end)),
            typeIds: Array.from(types.subarray(start, end)),
          });
          start = end;
        }
        return { encodings, stoppedAt: reply.stoppedAt === -1 ? undefined : reply.stoppedAt };
      });
    },
    async close() {
      closed = true;
      await Promise.all(workers.map((worker) => worker.terminate()));
    },
  };
}
