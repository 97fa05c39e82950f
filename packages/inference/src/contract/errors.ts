// How a worker's failures cross to the main thread: runners throw `InputError` for a bad item, and whatever is
// thrown becomes a `SerializedError` (plain data) before it is posted.
import type { SerializedError } from './messages.js';

/** Thrown by runners for a bad item; becomes an `INVALID_INPUT` result for that item only. */
export class InputError extends Error {
  override readonly name = 'InputError';
  readonly field: string | undefined;

  constructor(field: string | undefined, message: string) {
    super(message);
    this.field = field;
  }
}

/** Turns anything thrown in the worker into plain data. */
export function serializeError(error: unknown): SerializedError {
  if (error instanceof InputError) {
    return error.field === undefined
      ? { code: 'INVALID_INPUT', message: error.message }
      : { code: 'INVALID_INPUT', message: error.message, field: error.field };
  }
  if (error instanceof Error) {
    return error.stack === undefined
      ? { code: 'HANDLER_ERROR', message: error.message }
      : { code: 'HANDLER_ERROR', message: error.message, stack: error.stack };
  }
  return { code: 'HANDLER_ERROR', message: String(error) };
}
