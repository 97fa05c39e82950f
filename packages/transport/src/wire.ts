// What travels through a queue (Redis, NATS): request entries (web replica → workers) and reply entries (worker → the
// replica's own reply stream or subject), as flat field lists of strings.
import { BatchError, ErrorCode, isBatchError } from '@microbatch/core';

/** One request entry as a worker reads it. */
export interface RequestEntry {
  /** The transport's id for the entry (a Redis stream entry id, a JetStream stream sequence). */
  readonly entryId: string;
  /** When the broker stored it, in ms since the epoch (the broker's clock): deadlines count from here. */
  readonly queuedAtMs: number;
  /** The replica's id for the item; with `reply`, unique. */
  readonly itemId: string;
  /** Which handler runs it. */
  readonly handler: string;
  /** The replica's reply stream. */
  readonly reply: string;
  /** Milliseconds after `queuedAtMs` past which nobody waits for it; absent: no deadline. */
  readonly timeoutMs: number | undefined;
  readonly streaming: boolean;
  /** The input, as JSON. */
  readonly payload: string;
  /** The caller's trace context, as the replica's tracer sent it (JSON); absent or '' for none. */
  readonly trace?: string;
}

/**
 * Where a batch ran: the global batch id (worker and sequence), its size, the worker's pull size (`max`), the item's
 * wait in the queue, and (on answers) the handler's execution time so far.
 */
export interface WireBatch {
  readonly id: string;
  readonly size: number;
  readonly max: number;
  readonly queueMs: number;
  readonly executionMs?: number;
}

/** A serialised error: what the replica needs to answer the client as the worker would have. */
export interface WireError {
  readonly code: ErrorCode;
  readonly message: string;
  readonly expose: boolean;
  readonly details?: Readonly<Record<string, unknown>>;
  readonly retryAfterSeconds?: number;
}

/** Kinds of reply entries: `START` tells the replica its item's batch began (before any answer). */
export const ReplyKind = { START: 's', RESULT: 'r', ERROR: 'e', CHUNK: 'c', END: 'x' } as const;
export type ReplyKind = (typeof ReplyKind)[keyof typeof ReplyKind];

/** One reply entry as the replica reads it. */
export interface ReplyEntry {
  readonly entryId: string;
  readonly itemId: string;
  readonly kind: ReplyKind;
  /** JSON: the result or chunk, or a {@link WireError}. */
  readonly data: string;
  /** The batch, as JSON: the producer of a stream is its batch id. */
  readonly batch: string;
  /** A resumable stream's chunk: the tokens sent before it, and how many it carries. */
  readonly tokens?: { readonly offset: number; readonly count: number };
}

/** The fields of a request entry. */
export function requestFields(
  itemId: string,
  handler: string,
  reply: string,
  timeoutMs: number | undefined,
  streaming: boolean,
  payload: string,
  trace = '',
): string[] {
  return [
    'i',
    itemId,
    'h',
    handler,
    'r',
    reply,
    't',
    timeoutMs === undefined ? '' : String(Math.ceil(timeoutMs)),
    's',
    streaming ? '1' : '0',
    'p',
    payload,
    'c',
    trace,
  ];
}

/** The fields of a reply entry. */
export function replyFields(
  itemId: string,
  kind: ReplyKind,
  data: string,
  batch: WireBatch,
  tokens?: { readonly offset: number; readonly count: number },
): string[] {
  const fields = ['i', itemId, 'k', kind, 'd', data, 'b', JSON.stringify(batch)];
  return tokens === undefined ? fields : [...fields, 'o', `${tokens.offset}:${tokens.count}`];
}

/** The batch of a reply entry; a malformed one reads as an anonymous batch of 0. */
export function parseBatch(text: string): WireBatch {
  try {
    const batch = JSON.parse(text) as Partial<WireBatch>;
    const executionMs = Number(batch.executionMs);
    return {
      id: String(batch.id ?? ''),
      size: Number(batch.size ?? 0),
      max: Number(batch.max ?? 0),
      queueMs: Number(batch.queueMs ?? 0),
      ...(Number.isFinite(executionMs) ? { executionMs } : {}),
    };
  } catch {
    return { id: '', size: 0, max: 0, queueMs: 0 };
  }
}

/** A flat `[name, value, name, value, ...]` list as a map; `undefined` if it is not a list. */
export function fieldMap(fields: unknown): Map<string, string> | undefined {
  if (!Array.isArray(fields)) return undefined;
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(String(fields[i]), String(fields[i + 1]));
  return map;
}

/** A request entry from its fields; `undefined` if it is not one (deleted, or written by something else). */
export function toRequestEntry(
  entryId: string,
  queuedAtMs: number,
  fields: Map<string, string> | undefined,
): RequestEntry | undefined {
  const itemId = fields?.get('i');
  const handler = fields?.get('h');
  const reply = fields?.get('r');
  const payload = fields?.get('p');
  if (
    fields === undefined ||
    itemId === undefined ||
    handler === undefined ||
    reply === undefined ||
    payload === undefined
  )
    return undefined;
  const timeout = fields.get('t');
  return {
    entryId,
    queuedAtMs,
    itemId,
    handler,
    reply,
    timeoutMs: timeout === undefined || timeout === '' ? undefined : Number(timeout),
    streaming: fields.get('s') === '1',
    payload,
    trace: fields.get('c'),
  };
}

/** A reply entry from its fields; `undefined` if malformed. */
export function toReplyEntry(entryId: string, fields: Map<string, string> | undefined): ReplyEntry | undefined {
  const itemId = fields?.get('i');
  const kind = fields?.get('k');
  if (
    fields === undefined ||
    itemId === undefined ||
    kind === undefined ||
    !Object.values(ReplyKind).includes(kind as ReplyKind)
  )
    return undefined;
  const [offset, count] = (fields.get('o') ?? '').split(':').map(Number);
  return {
    entryId,
    itemId,
    kind: kind as ReplyKind,
    data: fields.get('d') ?? 'null',
    batch: fields.get('b') ?? '{}',
    ...(Number.isSafeInteger(offset) && Number.isSafeInteger(count)
      ? { tokens: { offset: offset as number, count: count as number } }
      : {}),
  };
}

/** An error as it travels: codes and exposure kept, so the replica answers what the worker's batcher would. */
export function toWireError(error: unknown): WireError {
  if (isBatchError(error)) {
    const { code, message, expose, details, retryAfterSeconds } = error;
    return {
      code,
      message,
      expose,
      ...(details === undefined ? {} : { details }),
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    };
  }
  // Unknown failures keep their message for the replica's logs, never for the client.
  return {
    code: ErrorCode.HANDLER_ERROR,
    message: error instanceof Error ? error.message : String(error),
    expose: false,
  };
}

export function fromWireError(text: string): BatchError {
  try {
    const wire = JSON.parse(text) as WireError;
    const code = Object.values(ErrorCode).includes(wire.code) ? wire.code : ErrorCode.HANDLER_ERROR;
    return new BatchError(code, String(wire.message), {
      expose: wire.expose === true,
      details: wire.details,
      retryAfterSeconds: wire.retryAfterSeconds,
    });
  } catch {
    return new BatchError(ErrorCode.HANDLER_ERROR, 'Malformed error reply from a worker', { expose: false });
  }
}
