import { BatchError, END, ErrorCode, SKIP } from '@microbatch/core';
import type { BatchContext, BatchHandler, StreamingBatchHandler } from '@microbatch/core';
import { type RequestEntry, ReplyKind, toWireError } from './wire.js';

/** What a worker runs: its handlers by name and how a pull is split into calls. */
export interface HandlerSettings {
  readonly handlers: Readonly<Record<string, BatchHandler<unknown, unknown>>>;
  readonly streamingHandlers: Readonly<Record<string, StreamingBatchHandler<unknown, unknown>>>;
  readonly batchKey: ((input: unknown) => unknown) | undefined;
}

/** Where a batch's answers go: one call per reply entry of item `index`. */
export type ReplySink = (index: number, kind: ReplyKind, data: string) => void;

/** The handler a batch runs, by name and kind. */
export type NamedHandler =
  | { readonly name: string; readonly streaming: false; readonly handler: BatchHandler<unknown, unknown> }
  | { readonly name: string; readonly streaming: true; readonly handler: StreamingBatchHandler<unknown, unknown> };

/**
 * Runs one batch through its handler under core's contract and sends every item its answer: a result or an error
 * (an `Error` in the results fails its item only), or for a streaming handler each value as a chunk, then an end.
 * A throw, or a result of the wrong shape, fails every item with it (an item whose stream already ended keeps its
 * answer: the replica keeps the first). Never throws; returns the batch's failure, if any.
 *
 * @example
 * ```ts
 * const failure = await executeBatch({ name: 'embed', streaming: false, handler }, inputs, context, send);
 * ```
 */
export async function executeBatch(
  target: NamedHandler,
  inputs: unknown[],
  context: BatchContext,
  send: ReplySink,
): Promise<unknown> {
  const size = inputs.length;
  try {
    if (target.streaming) {
      const open = inputs.map(() => true);
      for await (const step of target.handler(inputs, context)) {
        if (!Array.isArray(step) || step.length !== size) {
          throw new BatchError(
            ErrorCode.BAD_HANDLER_RESULT,
            `Expected each step of \`${target.name}\` to hold ${size} slots, got ${Array.isArray(step) ? step.length : typeof step}`,
          );
        }
        step.forEach((slot, index) => {
          if (!open[index] || slot === SKIP) return;
          if (slot === END) {
            open[index] = false;
            send(index, ReplyKind.END, 'null');
          } else if (slot instanceof Error) {
            open[index] = false;
            send(index, ReplyKind.ERROR, JSON.stringify(toWireError(slot)));
          } else {
            send(index, ReplyKind.CHUNK, JSON.stringify(slot ?? null));
          }
        });
      }
      open.forEach((isOpen, index) => isOpen && send(index, ReplyKind.END, 'null'));
      return undefined;
    }
    const results = await target.handler(inputs, context);
    if (!Array.isArray(results) || results.length !== size) {
      throw new BatchError(
        ErrorCode.BAD_HANDLER_RESULT,
        `Expected \`${target.name}\` to return ${size} results, got ${Array.isArray(results) ? results.length : typeof results}`,
      );
    }
    results.forEach((result, index) => {
      if (result instanceof Error) send(index, ReplyKind.ERROR, JSON.stringify(toWireError(result)));
      else send(index, ReplyKind.RESULT, JSON.stringify(result ?? null));
    });
    return undefined;
  } catch (error) {
    const wire = JSON.stringify(toWireError(error));
    for (let index = 0; index < size; index += 1) send(index, ReplyKind.ERROR, wire);
    return error;
  }
}

/** One handler call to make: its handler, its entries and their parsed inputs. */
export interface PlannedBatch {
  readonly target: NamedHandler;
  readonly entries: RequestEntry[];
  readonly inputs: unknown[];
}

/**
 * Splits one pull into handler calls (by handler name and `batchKey`), setting aside entries whose deadline passed
 * (by the broker's clock `now`; their replica answered `DEADLINE_EXCEEDED` already: running them would be wasted work) and entries that cannot
 * run here (no such handler, unreadable input), which are answered with an error.
 *
 * @example
 * ```ts
 * const { expired, refusals, batches } = planBatches(entries, brokerNow, settings);
 * ```
 */
export function planBatches(
  entries: readonly RequestEntry[],
  now: number,
  settings: HandlerSettings,
): { expired: string[]; refusals: Array<readonly [RequestEntry, BatchError]>; batches: PlannedBatch[] } {
  const expired: string[] = [];
  const refusals: Array<readonly [RequestEntry, BatchError]> = [];
  const groups = new Map<string, PlannedBatch>();
  for (const entry of entries) {
    if (entry.timeoutMs !== undefined && entry.queuedAtMs + entry.timeoutMs <= now) {
      expired.push(entry.entryId);
      continue;
    }
    const target = namedHandler(entry, settings);
    if (target === undefined) {
      refusals.push([
        entry,
        new BatchError(ErrorCode.UNAVAILABLE, `No worker handles \`${entry.handler}\` on this queue`),
      ]);
      continue;
    }
    let input: unknown;
    let key: unknown;
    try {
      input = JSON.parse(entry.payload);
      key = settings.batchKey?.(input);
    } catch (error) {
      refusals.push([
        entry,
        new BatchError(ErrorCode.INVALID_INPUT, `The queued input was unreadable: ${(error as Error)?.message}`),
      ]);
      continue;
    }
    const groupKey = JSON.stringify([
      entry.handler,
      entry.streaming,
      typeof key === 'string' || typeof key === 'number' ? key : String(key),
    ]);
    const group = groups.get(groupKey) ?? { target, entries: [], inputs: [] };
    groups.set(groupKey, group);
    group.entries.push(entry);
    group.inputs.push(input);
  }
  return { expired, refusals, batches: [...groups.values()] };
}

function namedHandler(entry: RequestEntry, settings: Omit<HandlerSettings, 'batchKey'>): NamedHandler | undefined {
  const name = entry.handler;
  if (entry.streaming) {
    const handler = Object.hasOwn(settings.streamingHandlers, name) ? settings.streamingHandlers[name] : undefined;
    return handler === undefined ? undefined : { name, streaming: true, handler };
  }
  const handler = Object.hasOwn(settings.handlers, name) ? settings.handlers[name] : undefined;
  return handler === undefined ? undefined : { name, streaming: false, handler };
}
