// The check every hostile request to an OpenAI-shaped endpoint must pass (the embeddings and encoder corpora): an
// answer, with its exact status and code, no internals, the field named in `details` and in OpenAI's `param`.
import { expect } from 'vitest';
import { type Outcome, errorBody, leaksInternals } from './http.js';

/** What a hostile request must be answered with. */
export interface ExpectedRefusal {
  readonly status: number;
  readonly code: string;
  /** The field the error names (`details.field` and `param`); none: `param` is null. */
  readonly field?: string | undefined;
}

/**
 * Asserts that `outcome` is the refusal `expected` says, in OpenAI's shape (`type: 'invalid_request_error'`, `param`
 * naming the field or null), leaking nothing; returns the error body for further checks.
 *
 * @example
 * ```ts
 * const error = expectOpenAiRefusal(await send(url, '/v1/embeddings', request), { status: 400, code: 'INVALID_INPUT' });
 * ```
 */
export function expectOpenAiRefusal(outcome: Outcome, expected: ExpectedRefusal): ReturnType<typeof errorBody> {
  expect(outcome.kind).toBe('answered');
  if (outcome.kind !== 'answered') return undefined;
  const error = errorBody(outcome.answer.body);
  expect([outcome.answer.status, error?.code]).toEqual([expected.status, expected.code]);
  expect(leaksInternals(outcome.answer.body)).toBe(false);
  expect((error?.details as { field?: string } | undefined)?.field).toBe(expected.field);
  expect(error).toMatchObject({ type: 'invalid_request_error', param: expected.field ?? null });
  return error;
}
