// What the encoder suites share (serve-encoders, encoder-queue, many-models-rag, many-models-fleet): the query,
// documents and labels they score, the three generated encoder folders (the real MiniLM WordPiece tokenizer, small
// random weights), a CLI run to its exit, a JSON POST, and the 1e-4 comparison with transformers.js's answers.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { ServerProcess } from '@microbatch/test-kit';
import { expect } from 'vitest';
import { writeBertEncoder } from '../../../inference/test/helpers/bert-encoder.js';
import { BIN } from './serve-config.js';

/** The rerank query. */
export const QUERY = 'How do request batchers pad their inputs?';
/** The documents reranked, scored, classified and embedded: lengths far apart, so batches pad. */
export const DOCUMENTS = [
  'Batching pads every input of a call to the longest one, and the mask keeps padding out of attention.',
  'Paris is the capital of France.',
  'Hello',
  'A cross-encoder reads the query and the document together.',
  'a b c d e f g h i j k l m n o p q r s t u v w x y z',
];
/** The generated classifier's labels. */
export const LABELS = ['negative', 'neutral', 'positive'];

/**
 * Writes the three encoder folders under `scratch`: an embedder, a cross-encoder (one label) and a classifier
 * ({@link LABELS}), each of its own seed.
 *
 * @example
 * ```ts
 * const { embedder, reranker, classifier } = await writeEncoders(scratch);
 * ```
 */
export async function writeEncoders(
  scratch: string,
): Promise<{ embedder: string; reranker: string; classifier: string }> {
  const embedder = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
  const reranker = await writeBertEncoder(join(scratch, 'tiny-cross-encoder'), {
    hidden: 32,
    labels: ['LABEL_0'],
    seed: 3,
  });
  const classifier = await writeBertEncoder(join(scratch, 'tiny-classifier'), {
    hidden: 32,
    labels: LABELS,
    seed: 5,
  });
  return { embedder, reranker, classifier };
}

/**
 * `microbatch ...args` run to its exit (a 60 s hang guard): its exit code and stderr.
 *
 * @example
 * ```ts
 * const { code, stderr } = await runCli(['worker', '--task', 'rerank', '--queue', url, '--model', classifier]);
 * ```
 */
export function runCli(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stderr });
    });
  });
}

/**
 * POSTs `body` as JSON to `path` on `server` (or its URL): the status and the parsed answer.
 *
 * @example
 * ```ts
 * const { status, json } = await post(server, '/v1/rerank', { query: QUERY, documents: DOCUMENTS });
 * ```
 */
export async function post(
  server: Pick<ServerProcess, 'url'> | string,
  path: string,
  body: unknown,
): Promise<{ status: number; json: any }> {
  const res = await fetch(`${typeof server === 'string' ? server : server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

/**
 * Expects `actual` to be `expected` within 1e-4 everywhere.
 *
 * @example
 * ```ts
 * expectClose(answer.data[0].embedding, reference[0]);
 * ```
 */
export function expectClose(actual: ArrayLike<number>, expected: readonly number[]): void {
  expect(actual).toHaveLength(expected.length);
  const worst = Math.max(...Array.from(actual, (value, index) => Math.abs(value - (expected[index] as number))));
  expect(worst).toBeLessThan(1e-4);
}
