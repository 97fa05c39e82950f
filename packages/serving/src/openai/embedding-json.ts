// The JSON text of OpenAI's embeddings answer, written straight from the model's float32 vectors: no `number[]` per
// vector and no generic serializer walking it (the float loop is several times faster than `JSON.stringify` of
// `Array.from(vector)`, and the text is the same), and base64 straight from each vector's own bytes.

/** Whether this machine stores floats little-endian, as the base64 encoding wants them (all Node targets but s390x). */
const LITTLE_ENDIAN = new Uint8Array(Float32Array.of(1).buffer)[3] === 0x3f;

/**
 * A little-endian float32 vector in base64, as the official clients decode it: on a little-endian machine straight
 * from the vector's own bytes (no copy), elsewhere through a little-endian copy.
 *
 * @example
 * ```ts
 * toBase64(Float32Array.of(1)); // 'AACAPw=='
 * ```
 */
export function toBase64(vector: Float32Array): string {
  if (LITTLE_ENDIAN) return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64');
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, index) => bytes.writeFloatLE(value, index * 4));
  return bytes.toString('base64');
}

/**
 * What an embeddings answer holds before it is written: the vectors in input order, as floats or base64.
 *
 * @example
 * ```ts
 * const answer: EmbeddingVectors = { vectors: [Float32Array.of(0.6, 0.8)], base64: false, model: 'm', tokens: 3 };
 * ```
 */
export interface EmbeddingVectors {
  readonly vectors: readonly Float32Array[];
  /** `encoding_format: 'base64'`: each vector's little-endian float32 bytes in base64. */
  readonly base64: boolean;
  readonly model: string;
  /** The inputs' tokens, for `usage`. */
  readonly tokens: number;
}

/**
 * OpenAI's `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[...]}],"model","usage"}` as JSON
 * text, each float written as `JSON.stringify` writes it (a non-finite one as `null`).
 *
 * @example
 * ```ts
 * embeddingListJson({ vectors: [Float32Array.of(0.5)], base64: false, model: 'm', tokens: 1 });
 * // '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"m","usage":{...}}'
 * ```
 */
export function embeddingListJson(answer: EmbeddingVectors): string {
  let text = '{"object":"list","data":[';
  answer.vectors.forEach((vector, index) => {
    text += `${index === 0 ? '' : ','}{"object":"embedding","index":${index},"embedding":`;
    text += answer.base64 ? `"${toBase64(vector)}"` : floatsJson(vector);
    text += '}';
  });
  const usage = JSON.stringify({ prompt_tokens: answer.tokens, total_tokens: answer.tokens });
  return `${text}],"model":${JSON.stringify(answer.model)},"usage":${usage}}`;
}

function floatsJson(vector: Float32Array): string {
  let text = '[';
  for (let index = 0; index < vector.length; index += 1) {
    const value = vector[index] as number;
    if (index > 0) text += ',';
    text += Number.isFinite(value) ? value : 'null';
  }
  return `${text}]`;
}
