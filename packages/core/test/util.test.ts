import { describe, expect, it } from 'vitest';
import {
  MAX_FINITE,
  checkInteger,
  checkNumber,
  checkOneOf,
  definedEntries,
  describeValue,
  dropUndefined,
  isAsyncGeneratorFunction,
} from '../src/util/index.js';

describe('option checks: one meaning of min and max everywhere', () => {
  it.each([
    [() => checkInteger('size', 0, 1), 'Expected `size` to be an integer >= 1, got `0` (number)'],
    [() => checkInteger('threads', 9, 1, 8), 'Expected `threads` to be an integer >= 1 and <= 8, got `9` (number)'],
    [
      () => checkNumber('timeoutMs', 0, 0, Number.POSITIVE_INFINITY, true),
      'Expected `timeoutMs` to be a number > 0, got `0` (number)',
    ],
    [
      () => checkNumber('waitMs', Number.POSITIVE_INFINITY, 0, MAX_FINITE),
      'Expected `waitMs` to be a finite number >= 0, got `Infinity` (number)',
    ],
    [() => checkNumber('topP', 0, 0, 1, true), 'Expected `topP` to be a number > 0 and <= 1, got `0` (number)'],
    [
      () => checkNumber('priority', Number.NaN, -MAX_FINITE, MAX_FINITE),
      'Expected `priority` to be a finite number, got `NaN` (number)',
    ],
    [() => checkOneOf('mode', 'x', ['a', 'b']), "Expected `mode` to be one of 'a', 'b', got `\"x\"` (string)"],
    [() => definedEntries('options', 1 as never), 'Expected `options` to be an object, got `1` (number)'],
  ])('%#: throws the house-style TypeError', (check, message) => {
    expect(check).toThrow(new TypeError(message));
  });

  it('passes what is in range and returns it', () => {
    expect(checkNumber('timeoutMs', Number.POSITIVE_INFINITY, 0, Number.POSITIVE_INFINITY, true)).toBe(
      Number.POSITIVE_INFINITY,
    );
    expect(checkNumber('topP', 1, 0, 1, true)).toBe(1);
    expect(checkInteger('threads', 8, 1, 8)).toBe(8);
  });
});

describe('definedness and detection', () => {
  it('drops undefined entries only', () => {
    expect(dropUndefined({ a: 1, b: undefined, c: null, d: 0 })).toEqual({ a: 1, c: null, d: 0 });
    expect(definedEntries('options', undefined)).toEqual({});
    expect(definedEntries('options', { maxBatchSize: undefined, name: 'a' })).toEqual({ name: 'a' });
  });

  it('tells an async generator function from other functions', () => {
    expect(isAsyncGeneratorFunction(async function* () {})).toBe(true);
    expect(isAsyncGeneratorFunction(async () => [])).toBe(false);
    expect(isAsyncGeneratorFunction(function* () {})).toBe(false);
  });

  it('describes values briefly, naming arrays and null', () => {
    expect(describeValue(null)).toBe('`null` (null)');
    expect(describeValue(['a'])).toBe('`["a"]` (array)');
    expect(describeValue(() => 1)).toBe('`function` (function)');
  });
});
