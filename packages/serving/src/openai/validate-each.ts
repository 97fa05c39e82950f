// The inputs of one request (a completion's prompts, a chat's choices) through the model's `validate`, which may
// answer later (its token count on a tokenizer thread): in order, one at a time, so the first bad input is the one
// named whichever way it is checked, and nothing after it is tokenized.
import { isPromiseLike } from '@microbatch/core/util';

/**
 * `validate(0)` ... `validate(count - 1)` in order, each failure passed through `rename` (the request's own name for
 * the field) before it is thrown. Synchronous while every call is; from the first call that returns a promise on,
 * the rest wait for it, and the result is a promise.
 *
 * @example
 * ```ts
 * const inputs = validateEach(prompts.length, (index) => validate({ prompt: prompts[index] }), (error) => error);
 * ```
 */
export function validateEach<T>(
  count: number,
  validate: (index: number) => T | PromiseLike<T>,
  rename: (error: unknown, index: number) => unknown,
): T[] | Promise<T[]> {
  const done: T[] = [];
  for (let index = 0; index < count; index += 1) {
    const result = attempt(validate, rename, index);
    if (isPromiseLike(result)) return settleRest(result, index, count, validate, rename, done);
    done.push(result);
  }
  return done;
}

function attempt<T>(
  validate: (index: number) => T | PromiseLike<T>,
  rename: (error: unknown, index: number) => unknown,
  index: number,
): T | PromiseLike<T> {
  try {
    return validate(index);
  } catch (error) {
    throw rename(error, index);
  }
}

async function settleRest<T>(
  pending: PromiseLike<T>,
  first: number,
  count: number,
  validate: (index: number) => T | PromiseLike<T>,
  rename: (error: unknown, index: number) => unknown,
  done: T[],
): Promise<T[]> {
  for (let index = first; index < count; index += 1) {
    try {
      done.push(await (index === first ? pending : validate(index)));
    } catch (error) {
      throw rename(error, index);
    }
  }
  return done;
}
