// What an encoder's items and answers are on a shared queue (entries travel as JSON): the handler names a queue
// worker serves and web replicas call, the entry of one text or pair (its token ids, tokenized on the replica), and
// the worker's answer (a pooled embedding as little-endian float32 bytes in base64, exact and a third the size of
// JSON floats; a classifier's logits as numbers).
import type { OnnxInput } from '@microbatch/inference';
import type { EncoderTask } from './encoder-folder.js';
import type { Pooling } from './embedding-pooling.js';

/**
 * The handler name each encoder task is served under on a queue (the local batchers' names too).
 *
 * @example
 * ```ts
 * createRedisWorker({ ..., handlers: { [ENCODER_HANDLERS.rerank]: handler } });
 * ```
 */
export const ENCODER_HANDLERS: Readonly<Record<EncoderTask, string>> = Object.freeze({
  'feature-extraction': 'embed',
  rerank: 'rerank',
  'text-classification': 'classify',
});

/**
 * One text to embed, as a replica queues it: its token ids and how the worker pools them (the replica's choice, so
 * what it reports is what runs).
 *
 * @example
 * ```ts
 * const entry: EmbedEntry = { input_ids: [101, 7592, 102], token_type_ids: [0, 0, 0], pooling: 'mean', normalize: true };
 * ```
 */
export interface EmbedEntry {
  readonly input_ids: readonly number[];
  readonly token_type_ids?: readonly number[];
  readonly pooling: Pooling;
  readonly normalize: boolean;
}

/** A worker's answer to an {@link EmbedEntry}: the embedding's float32 bytes, little-endian, in base64. */
export interface EmbedAnswer {
  readonly embedding: string;
}

/** A worker's answer to a classifier item (an `OnnxInput`: ids and segment ids): the item's logits. */
export interface LogitsAnswer {
  readonly logits: readonly number[];
}

/** A classifier item as a replica queues it. */
export type ClassifierEntry = OnnxInput;

/**
 * Float32 values as little-endian bytes in base64 (exact: a float32 is written as itself).
 *
 * @example
 * ```ts
 * floatsFromWire(floatsToWire(Float32Array.of(0.5))); // Float32Array [0.5]
 * ```
 */
export function floatsToWire(values: Float32Array): string {
  const bytes = Buffer.alloc(values.length * 4);
  for (let index = 0; index < values.length; index += 1) bytes.writeFloatLE(values[index] as number, index * 4);
  return bytes.toString('base64');
}

/** The floats {@link floatsToWire} wrote; throws when the text is not whole float32s of `length` values. */
export function floatsFromWire(text: unknown, length: number): Float32Array {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'base64') : Buffer.alloc(0);
  if (bytes.length !== length * 4) {
    throw new Error(`Expected a worker's embedding of ${length} floats, got ${bytes.length} bytes`);
  }
  const values = new Float32Array(length);
  for (let index = 0; index < length; index += 1) values[index] = bytes.readFloatLE(index * 4);
  return values;
}
