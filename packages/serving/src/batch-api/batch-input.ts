// A batch's input file, read as OpenAI reads it: JSONL, one request per line (`custom_id`, `method: "POST"`, `url`
// equal to the batch's endpoint, `body` an object), each line within a byte bound and the file within a line count.
// The file is streamed, never held whole: a line past its bound is counted and skipped, not buffered.
import type { BatchEndpoint, BatchInputError } from './batch-store.js';

/**
 * The bounds a batch's input file is checked against.
 *
 * @example
 * ```ts
 * const bounds: BatchInputBounds = { maxLines: 50_000, maxLineBytes: 1_000_000 };
 * ```
 */
export interface BatchInputBounds {
  /** Requests one batch may hold (OpenAI's 50,000). */
  readonly maxLines: number;
  /** Bytes of one line. */
  readonly maxLineBytes: number;
}

/** One line of an input file: its text, or `undefined` when it was longer than the bound (then skipped). */
export interface RawLine {
  /** 1-based, as the `errors` of a batch name it. */
  readonly line: number;
  readonly text: string | undefined;
}

/** One valid request line. */
export interface BatchRequestLine {
  readonly line: number;
  readonly customId: string;
  readonly body: Readonly<Record<string, unknown>>;
}

/** The most errors a failed batch lists (a file of 50,000 bad lines names the first ones). */
const MAX_LISTED_ERRORS = 100;

const NEWLINE = 0x0a;

/**
 * The lines of `source` (a stored file's bytes), streamed; a line past `maxLineBytes` comes as `text: undefined` without being
 * buffered, blank lines are skipped.
 *
 * @example
 * ```ts
 * for await (const { line, text } of readLines(await storage.blobs.get(fileId), 1_000_000)) console.log(line, text);
 * ```
 */
export async function* readLines(source: AsyncIterable<Uint8Array>, maxLineBytes: number): AsyncGenerator<RawLine> {
  let parts: Buffer[] = [];
  let size = 0;
  let overlong = false;
  let line = 0;
  const finish = (): RawLine | undefined => {
    line += 1;
    const text = overlong ? undefined : Buffer.concat(parts, size).toString('utf8');
    parts = [];
    size = 0;
    const wasOverlong = overlong;
    overlong = false;
    if (!wasOverlong && text !== undefined && text.trim() === '') return undefined;
    return { line, text };
  };
  for await (const bytes of source) {
    const chunk = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let start = 0;
    while (start < chunk.length) {
      const end = chunk.indexOf(NEWLINE, start);
      const piece = chunk.subarray(start, end === -1 ? chunk.length : end);
      if (!overlong) {
        if (size + piece.length > maxLineBytes) {
          overlong = true;
          parts = [];
          size = 0;
        } else {
          parts.push(piece);
          size += piece.length;
        }
      }
      if (end === -1) break;
      const done = finish();
      if (done !== undefined) yield done;
      start = end + 1;
    }
  }
  if (size > 0 || overlong) {
    const done = finish();
    if (done !== undefined) yield done;
  }
}

/**
 * Checks one line: a JSON object with a string `custom_id` not seen before, `method: "POST"`, `url` equal to
 * `endpoint`, and an object `body`. Returns the request, or the error naming the line.
 */
export function checkLine(
  raw: RawLine,
  endpoint: BatchEndpoint,
  seen: Set<string>,
  maxLineBytes: number,
): BatchRequestLine | BatchInputError {
  const error = (code: string, message: string, param: string | null = null): BatchInputError => ({
    code,
    message,
    param,
    line: raw.line,
  });
  if (raw.text === undefined) return error('line_too_large', `Line ${raw.line} is longer than ${maxLineBytes} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(raw.text);
  } catch {
    return error('invalid_json_line', `Line ${raw.line} is not valid JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return error('invalid_json_line', `Line ${raw.line} is not a JSON object`);
  }
  const { custom_id: customId, method, url, body } = value as Record<string, unknown>;
  if (typeof customId !== 'string' || customId === '' || customId.length > 512) {
    return error('missing_custom_id', `Line ${raw.line}: \`custom_id\` must be a non-empty string`, 'custom_id');
  }
  if (seen.has(customId)) {
    return error('duplicate_custom_id', `Line ${raw.line}: \`custom_id\` is not unique in the file`, 'custom_id');
  }
  if (method !== 'POST') return error('invalid_method', `Line ${raw.line}: \`method\` must be "POST"`, 'method');
  if (url !== endpoint) {
    return error('invalid_url', `Line ${raw.line}: \`url\` must be the batch's endpoint, ${endpoint}`, 'url');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return error('invalid_body', `Line ${raw.line}: \`body\` must be a JSON object`, 'body');
  }
  seen.add(customId);
  return { line: raw.line, customId, body: body as Record<string, unknown> };
}

/**
 * Validates the whole input file (`source`, its bytes streamed): the number of requests, or the errors that fail the batch (each naming its line;
 * at most the first 100 listed).
 *
 * @example
 * ```ts
 * const checked = await validateInput(source, '/v1/completions', { maxLines: 50_000, maxLineBytes: 1e6 });
 * if ('errors' in checked) fail(checked.errors);
 * ```
 */
export async function validateInput(
  source: AsyncIterable<Uint8Array>,
  endpoint: BatchEndpoint,
  bounds: BatchInputBounds,
): Promise<{ readonly total: number } | { readonly errors: readonly BatchInputError[] }> {
  const seen = new Set<string>();
  const errors: BatchInputError[] = [];
  let total = 0;
  for await (const raw of readLines(source, bounds.maxLineBytes)) {
    total += 1;
    if (total > bounds.maxLines) {
      errors.push({
        code: 'too_many_requests',
        message: `The file has more than ${bounds.maxLines} requests`,
        param: null,
        line: raw.line,
      });
      break;
    }
    const checked = checkLine(raw, endpoint, seen, bounds.maxLineBytes);
    if ('code' in checked && errors.length < MAX_LISTED_ERRORS) errors.push(checked);
  }
  if (total === 0) errors.push({ code: 'empty_file', message: 'The file has no requests', param: null, line: null });
  return errors.length > 0 ? { errors } : { total };
}
