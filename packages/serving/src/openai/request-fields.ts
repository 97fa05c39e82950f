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

/** The longest `cache_salt` accepted (it is hashed into every cached block of the request's prompts). */
const MAX_CACHE_SALT_LENGTH = 256;

/**
 * `cache_salt` (vLLM's): a partition of the prefix cache of the request's own, within its tenant's, so that only
 * requests sending the same salt reuse each other's cached prompt blocks. A string of 1 to 256 characters, or
 * absent (`undefined`).
 *
 * @example
 * ```ts
 * readCacheSalt('conversation-42'); // 'conversation-42'
 * ```
 */
export function readCacheSalt(value: unknown): string | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_CACHE_SALT_LENGTH) {
    throw invalidField(
      'cache_salt',
      `\`cache_salt\` must be a string of 1 to ${MAX_CACHE_SALT_LENGTH} characters, got ${describe(value)}`,
    );
  }
  return value;
}
