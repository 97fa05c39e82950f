// What the OpenAI request parsers (completions, chat) check alike, written once.
import { BatchError, ErrorCode, describeValue as describe } from '@microbatch/core';

/**
 * The 400 of a bad request field: `INVALID_INPUT`, naming the field in `details.field` (OpenAI's `param`).
 *
 * @example
 * ```ts
 * throw invalidField('stop', '`stop` must be a string or up to 4 strings, got `1` (number)');
 * ```
 */
export function invalidField(field: string, message: string, extra: Record<string, unknown> = {}): BatchError {
  return new BatchError(ErrorCode.INVALID_INPUT, message, { details: { field, ...extra } });
}

/**
 * Whether an optional JSON field was left out: absent or `null`, as OpenAI reads them.
 *
 * @example
 * ```ts
 * isAbsent(null); // true
 * ```
 */
export function isAbsent(value: unknown): boolean {
  return value === undefined || value === null;
}

/**
 * Reads `stream_options` (`{ include_usage?: boolean }`, or absent): whether a streamed answer ends with its usage.
 *
 * @example
 * ```ts
 * readIncludeUsage({ include_usage: true }); // true
 * ```
 */
export function readIncludeUsage(streamOptions: unknown): boolean {
  if (isAbsent(streamOptions)) return false;
  const includeUsage = (streamOptions as { include_usage?: unknown }).include_usage;
  if (
    typeof streamOptions !== 'object' ||
    Array.isArray(streamOptions) ||
    !(isAbsent(includeUsage) || typeof includeUsage === 'boolean')
  ) {
    throw invalidField(
      'stream_options',
      `\`stream_options\` must be an object like {"include_usage": true}, got ${describe(streamOptions)}`,
    );
  }
  return includeUsage === true;
}
