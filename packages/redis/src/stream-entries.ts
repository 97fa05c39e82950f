// Reading Redis stream replies: the Redis side of the shared wire format (`@microbatch/transport`'s field lists).
import { fieldMap } from '@microbatch/transport';

/** Entries of a raw `XREAD`/`XREADGROUP` reply for one stream: `[[key, [[id, fields], ...]]]` or null. */
export function streamEntries(reply: unknown): Array<readonly [id: string, fields: Map<string, string> | undefined]> {
  if (!Array.isArray(reply) || reply.length === 0) return [];
  const [, entries] = reply[0] as [unknown, unknown];
  return rawEntries(entries);
}

/** `[[id, fields], ...]`; a deleted entry (still pending) has no fields. */
export function rawEntries(entries: unknown): Array<readonly [id: string, fields: Map<string, string> | undefined]> {
  if (!Array.isArray(entries)) return [];
  return entries
    .filter((entry): entry is [unknown, unknown] => Array.isArray(entry))
    .map(([id, fields]) => [String(id), fieldMap(fields)] as const);
}

/** The time part of a stream entry id: when Redis added it, in ms since the epoch (Redis's clock). */
export function entryTimeMs(entryId: string): number {
  return Number(entryId.slice(0, entryId.indexOf('-')));
}
