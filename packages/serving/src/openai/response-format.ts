// Structured outputs on the wire: OpenAI's `response_format` (JSON mode, JSON Schema) and vLLM's
// `structured_outputs` extra (`json`, `regex`, `choice`), read into the one grammar a generation input carries.
// Whatever a grammar cannot enforce is a 400 naming the field and the problem, never a looser answer.
import { BatchError, describeValue as describe, isBatchError } from '@microbatch/core';
import { checkGrammarSpec } from '@microbatch/inference';
import type { GrammarSpec } from '@microbatch/inference';
import { invalidField as invalid, isAbsent } from './request-fields.js';

/** OpenAI's rule for `json_schema.name`. */
const SCHEMA_NAME = /^[\w-]{1,64}$/;

/** A grammar check whose errors name `field` (the wire's name) instead of the input's `grammar`. */
function checked(value: unknown, field: string): GrammarSpec {
  return checkGrammarSpec(value, (_field, message) => invalid(field, `\`${field}\`: ${message}`));
}

/** `response_format`: absent or `text` (no grammar), `json_object`, or `json_schema`. */
function readResponseFormat(value: unknown): GrammarSpec | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(
      'response_format',
      `\`response_format\` must be an object like {"type": "json_object"}, got ${describe(value)}`,
    );
  }
  const { type, json_schema: jsonSchema } = value as Record<string, unknown>;
  if (type === 'text') return undefined;
  if (type === 'json_object') return { type: 'json' };
  if (type !== 'json_schema') {
    throw invalid(
      'response_format',
      `\`response_format.type\` must be "text", "json_object" or "json_schema", got ${describe(type)}`,
    );
  }
  if (typeof jsonSchema !== 'object' || jsonSchema === null || Array.isArray(jsonSchema)) {
    throw invalid(
      'response_format',
      '`response_format.json_schema` must be an object like {"name": "answer", "schema": {...}}',
    );
  }
  const { name, schema, strict } = jsonSchema as Record<string, unknown>;
  if (typeof name !== 'string' || !SCHEMA_NAME.test(name)) {
    throw invalid(
      'response_format',
      `\`response_format.json_schema.name\` must be 1 to 64 letters, digits, \`_\` or \`-\`, got ${describe(name)}`,
    );
  }
  if (!isAbsent(strict) && typeof strict !== 'boolean') {
    throw invalid(
      'response_format',
      `\`response_format.json_schema.strict\` must be a boolean, got ${describe(strict)}`,
    );
  }
  // Strict or not, the schema is enforced: a grammar cannot enforce "mostly".
  return checked(isAbsent(schema) ? { type: 'json' } : { type: 'json', schema }, 'response_format');
}

/** vLLM's `structured_outputs`: exactly one of `json` (a schema, or its JSON text), `regex`, `choice`. */
function readStructuredOutputs(value: unknown): GrammarSpec {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid('structured_outputs', `\`structured_outputs\` must be an object, got ${describe(value)}`);
  }
  const record = value as Record<string, unknown>;
  const given = Object.keys(record).filter((key) => !isAbsent(record[key]));
  const known = ['json', 'regex', 'choice', 'json_object'];
  const unknown = given.find((key) => !known.includes(key));
  if (unknown !== undefined) {
    throw invalid(
      'structured_outputs',
      `\`structured_outputs.${unknown.slice(0, 64)}\` is not supported (only json, regex, choice, json_object)`,
    );
  }
  if (given.length !== 1) {
    throw invalid(
      'structured_outputs',
      '`structured_outputs` must give exactly one of json, regex, choice, json_object',
    );
  }
  const [key] = given as [string];
  const field = `structured_outputs.${key}`;
  if (key === 'json_object') {
    if (record.json_object !== true)
      throw invalid('structured_outputs', '`structured_outputs.json_object` must be true');
    return { type: 'json' };
  }
  if (key === 'json') {
    let schema = record.json;
    if (typeof schema === 'string') {
      try {
        schema = JSON.parse(schema);
      } catch {
        throw invalid('structured_outputs', '`structured_outputs.json` is a string that is not JSON');
      }
    }
    return checked({ type: 'json', schema }, field);
  }
  if (key === 'regex') return checked({ type: 'regex', pattern: record.regex }, field);
  return checked({ type: 'choice', choices: record.choice }, field);
}

/**
 * The grammar a request's body asks for (`response_format` or `structured_outputs`, not both), or `undefined` for
 * free text. Throws `BatchError('INVALID_INPUT')` naming the field and the problem (an unsupported schema keyword,
 * an oversized or deeply nested schema, an invalid regex).
 *
 * @example
 * ```ts
 * readStructuredOutput({ response_format: { type: 'json_object' } }); // { type: 'json' }
 * ```
 */
export function readStructuredOutput(fields: Readonly<Record<string, unknown>>): GrammarSpec | undefined {
  const format = isAbsent(fields.response_format) ? undefined : readResponseFormat(fields.response_format);
  if (isAbsent(fields.structured_outputs)) return format;
  if (format !== undefined) {
    throw invalid('structured_outputs', '`structured_outputs` and `response_format` cannot be combined: give one');
  }
  return readStructuredOutputs(fields.structured_outputs);
}

/**
 * Which body field a request's grammar came from (`response_format`, `structured_outputs`), for the `param` of
 * errors the worker reports about it; `undefined` without a grammar from these fields.
 *
 * @example
 * ```ts
 * structuredOutputParam({ structured_outputs: { regex: 'a+' } }); // 'structured_outputs'
 * ```
 */
export function structuredOutputParam(fields: Readonly<Record<string, unknown>>): string | undefined {
  if (!isAbsent(fields.structured_outputs)) return 'structured_outputs';
  const type = (fields.response_format as { type?: unknown } | null | undefined)?.type;
  return type === 'json_object' || type === 'json_schema' ? 'response_format' : undefined;
}

/**
 * A worker's error about the input's `grammar` (it does not compile, the vocabulary cannot spell it) named after the
 * body field the client used (`param`), so OpenAI clients see their own field; any other error as it is.
 *
 * @example
 * ```ts
 * throw renameGrammarError(error, request.grammarParam);
 * ```
 */
export function renameGrammarError(error: unknown, param: string | undefined): unknown {
  if (param === undefined || !isBatchError(error) || error.details?.field !== 'grammar') return error;
  return new BatchError(error.code, error.message, { cause: error, details: { ...error.details, field: param } });
}
