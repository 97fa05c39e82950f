// The messages between the pool (main thread) and a worker. Everything here crosses `postMessage`, so it is
// plain data: errors travel as `SerializedError` (`errors.ts`) and become `BatchError`s again on the main thread.
import type { DecodeActivity } from './decode-activity.js';
import type { ResolvedRunnerSpec } from './runner-specs.js';

/** Test-only behaviour injected through `createWorkerPoolForTesting`; never set by the public API. */
export interface TestHooks {
  /** `process.exit(70)` in the worker when an input's JSON contains this text. */
  readonly exitOn?: string;
  /** Throw an uncaught exception in the worker when an input's JSON contains this text. */
  readonly throwOn?: string;
  /** Block the worker's thread in a busy loop when an input's JSON contains this text. */
  readonly hangOn?: string;
}

/** The `workerData` each worker starts with. */
export interface WorkerInit {
  readonly index: number;
  readonly spec: ResolvedRunnerSpec;
  readonly executionProvider: string;
  readonly threads: number;
  readonly hooks: TestHooks | undefined;
  /**
   * One Int32 the pool sets to 1 when the running batch is no longer wanted: runners that can stop between steps
   * (text generation, between tokens) check it, so the worker need not be terminated in the middle of a native call.
   */
  readonly cancel: SharedArrayBuffer;
}

/** The error codes a worker may report for one item or a whole batch. */
export type WorkerErrorCode = 'INVALID_INPUT' | 'HANDLER_ERROR';

/** An error as plain data. */
export interface SerializedError {
  readonly code: WorkerErrorCode;
  readonly message: string;
  /** The offending input field, for `INVALID_INPUT`. */
  readonly field?: string;
  readonly stack?: string;
}

/** One item's outcome. */
export type ItemResult =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: SerializedError };

/** One item's slot in a streamed step: a chunk, nothing new (`null`), or a failure. */
export type StepSlot = { readonly chunk: unknown } | { readonly error: SerializedError } | null;

/** Main thread to worker. */
export interface RunMessage {
  readonly type: 'run';
  readonly id: number;
  readonly inputs: readonly unknown[];
  readonly stream: boolean;
}

/** Main thread to worker: a run, the cancellation of one run (continuous scheduling), or a stats request. */
export type PoolMessage =
  | RunMessage
  | { readonly type: 'cancel'; readonly id: number }
  | { readonly type: 'stats'; readonly id: number };

/** Worker to main thread. */
export type WorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'load-error'; readonly message: string; readonly stack?: string }
  | { readonly type: 'step'; readonly id: number; readonly slots: readonly StepSlot[] }
  | { readonly type: 'result'; readonly id: number; readonly results: readonly ItemResult[] }
  | { readonly type: 'failed'; readonly id: number; readonly error: SerializedError }
  | { readonly type: 'stats'; readonly id: number; readonly stats: Readonly<Record<string, number>> }
  | { readonly type: 'activity'; readonly activity: DecodeActivity }
  | { readonly type: 'batch'; readonly messages: readonly WorkerMessage[] };
