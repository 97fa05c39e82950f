// The check of a request's `grammar` (structured outputs), shared by the HTTP side and the worker: what is refused
// here is refused with the same message wherever it is checked, before anything is compiled. Bounds keep what one
// request can make a worker compile small.
import { describeValue } from '@microbatch/core/util';
import type { GrammarSpec } from '../contract/text-generation-types.js';
import { regexToEbnf } from './regex-to-ebnf.js';
import { schemaProblem } from './schema-keywords.js';

/** The largest schema, as JSON text. */
export const MAX_SCHEMA_CHARS = 32_768;
/** The deepest nesting of subschemas. */
export const MAX_SCHEMA_DEPTH = 16;
/** The most subschemas of one schema. */
export const MAX_SCHEMA_NODES = 512;
/** The longest `regex` pattern. */
export const MAX_PATTERN_CHARS = 1_000;
/** The most `choice` entries, and the longest one. */
export const MAX_CHOICES = 256;
export const MAX_CHOICE_CHARS = 256;

/**
 * Checks an untrusted `grammar` value; returns it as plain data (a copy) or throws what `invalid` builds, naming
 * the problem (`field` is `grammar`).
 *
 * @example
 * ```ts
 * const grammar = checkGrammarSpec({ type: 'choice', choices: ['yes', 'no'] }, (field, message) => new TypeError(message));
 * ```
 */
export function checkGrammarSpec(value: unknown, invalid: (field: string, message: string) => Error): GrammarSpec {
  const bad = (message: string) => invalid('grammar', message);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw bad(`\`grammar\` must be an object, got ${describeValue(value)}`);
  }
  const record = value as Record<string, unknown>;
  switch (record.type) {
    case 'json': {
      if (record.schema === undefined || record.schema === null) return { type: 'json' };
      const { schema } = record;
      if (typeof schema !== 'object' || Array.isArray(schema)) {
        throw bad(`the JSON schema must be an object, got ${describeValue(schema)}`);
      }
      let text: string;
      try {
        text = JSON.stringify(schema);
      } catch {
        throw bad('the JSON schema cannot be serialized');
      }
      if (text.length > MAX_SCHEMA_CHARS) {
        throw bad(`the JSON schema is ${text.length} characters, more than ${MAX_SCHEMA_CHARS}`);
      }
      const problem = schemaProblem(schema, { maxDepth: MAX_SCHEMA_DEPTH, maxNodes: MAX_SCHEMA_NODES });
      if (problem !== undefined) throw bad(problem);
      return { type: 'json', schema: JSON.parse(text) as Record<string, unknown> };
    }
    case 'regex': {
      const { pattern } = record;
      if (typeof pattern !== 'string' || pattern.length === 0 || pattern.length > MAX_PATTERN_CHARS) {
        throw bad(`the regex must be a string of 1 to ${MAX_PATTERN_CHARS} characters, got ${describeValue(pattern)}`);
      }
      try {
        regexToEbnf(pattern);
      } catch (error) {
        throw bad(`invalid regex: ${error instanceof Error ? error.message : String(error)}`);
      }
      return { type: 'regex', pattern };
    }
    case 'choice': {
      const { choices } = record;
      if (
        !Array.isArray(choices) ||
        choices.length === 0 ||
        choices.length > MAX_CHOICES ||
        choices.some((choice) => typeof choice !== 'string' || choice.length === 0 || choice.length > MAX_CHOICE_CHARS)
      ) {
        throw bad(
          `the choices must be an array of 1 to ${MAX_CHOICES} strings of 1 to ${MAX_CHOICE_CHARS} characters, got ${describeValue(choices)}`,
        );
      }
      return { type: 'choice', choices: [...(choices as string[])] };
    }
    default:
      throw bad(`\`grammar.type\` must be 'json', 'regex' or 'choice', got ${describeValue(record.type)}`);
  }
}
