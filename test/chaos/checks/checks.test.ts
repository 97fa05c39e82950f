// The chaos run's judgement of one exchange, on its own: the text comparison (repeated, skipped, mismatched told
// apart) and the outcome rules. Pure functions, so this runs in the default `pnpm test`; the run itself does not.
import { describe, expect, it } from 'vitest';
import { type Exchange, outcomeOf } from './outcome.js';
import { compareText } from './text-check.js';

const EXPECTED = 'Once upon a time, there was a little dog.';

const exchange = (fields: Partial<Exchange>): Exchange => ({
  status: 200,
  streamed: true,
  end: 'done',
  text: EXPECTED,
  errorCode: undefined,
  eventsAfterEnd: 0,
  detail: undefined,
  ...fields,
});

describe('compareText', () => {
  it('accepts the exact text, and a prefix of it only when the answer was cut', () => {
    expect(compareText(EXPECTED, EXPECTED, true)).toBe('exact');
    expect(compareText(EXPECTED, 'Once upon a', false)).toBe('exact');
    expect(compareText(EXPECTED, '', false)).toBe('exact');
    expect(compareText(EXPECTED, 'Once upon a', true)).toBe('skipped');
  });

  it('calls a text sent again from an earlier point repeated: a doubled stream, a replayed middle', () => {
    expect(compareText(EXPECTED, EXPECTED + EXPECTED, true)).toBe('repeated');
    expect(compareText(EXPECTED, 'Once upon a time, a time, there was a little dog.', true)).toBe('repeated');
    expect(compareText(EXPECTED, 'Once upon a time, there was a time, there', false)).toBe('repeated');
  });

  it('calls a text that jumps ahead skipped, and anything else mismatched', () => {
    expect(compareText(EXPECTED, 'Once upon a little dog.', true)).toBe('skipped');
    expect(compareText(EXPECTED, 'Once upon was a little', false)).toBe('skipped');
    expect(compareText(EXPECTED, 'Once upon a time, there was a little cat.', true)).toBe('mismatched');
    expect(compareText(EXPECTED, 'Once upon a zebra', false)).toBe('mismatched');
  });

  it('refuses what is not a string', () => {
    expect(() => compareText(EXPECTED, undefined as unknown as string, true)).toThrow(
      'Expected two strings, got string and undefined',
    );
  });
});

describe('outcomeOf', () => {
  it('allows the exact text, a JSON 503/504, and a stream cut by an error event after a prefix', () => {
    expect(outcomeOf(exchange({ streamed: false, end: 'body' }), EXPECTED)).toBe('ok');
    expect(outcomeOf(exchange({}), EXPECTED)).toBe('ok');
    expect(outcomeOf(exchange({ status: 503, end: 'body', text: '', errorCode: 'UNAVAILABLE' }), EXPECTED)).toBe(
      'refused',
    );
    expect(outcomeOf(exchange({ status: 504, end: 'body', text: '', errorCode: 'TIMEOUT' }), EXPECTED)).toBe('refused');
    expect(outcomeOf(exchange({ end: 'error-event', text: 'Once upon', errorCode: 'UNAVAILABLE' }), EXPECTED)).toBe(
      'stream-error',
    );
  });

  it('names each violation', () => {
    expect(outcomeOf(exchange({ text: EXPECTED + EXPECTED }), EXPECTED)).toBe('repeated');
    expect(outcomeOf(exchange({ end: 'error-event', text: 'Once upon Once', errorCode: 'X' }), EXPECTED)).toBe(
      'repeated',
    );
    expect(outcomeOf(exchange({ end: 'reset', status: undefined, text: '' }), EXPECTED)).toBe('reset');
    expect(outcomeOf(exchange({ end: 'eof', text: 'Once' }), EXPECTED)).toBe('reset');
    expect(outcomeOf(exchange({ end: 'deadline', status: undefined, text: '' }), EXPECTED)).toBe('hang');
    // A refusal must be a 503/504 carrying a JSON error: anything else is not one.
    expect(outcomeOf(exchange({ status: 503, end: 'body', text: '', errorCode: undefined }), EXPECTED)).toBe(
      'bad-status',
    );
    expect(outcomeOf(exchange({ status: 500, end: 'body', text: '', errorCode: 'INTERNAL' }), EXPECTED)).toBe(
      'bad-status',
    );
    expect(outcomeOf(exchange({ eventsAfterEnd: 2 }), EXPECTED)).toBe('after-end');
  });
});
