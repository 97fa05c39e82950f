// Taking over a dead worker's entries, and keeping a live worker's from being taken.
import type { Connection } from './connection.js';
import type { QueueKeys } from './keys.js';
import { type RequestEntry, toRequestEntry } from '@microbatch/transport';
import { entryTimeMs, rawEntries } from './stream-entries.js';

/** What one {@link claimIdle} took over. */
export interface Claim {
  /** Where the next scan starts (`0-0` once the whole pending list was scanned). */
  readonly cursor: string;
  /** Entries to run again. */
  readonly entries: readonly RequestEntry[];
  /** Entries delivered more than `maxDeliveries` times: to be answered with an error, not run. */
  readonly poisoned: readonly RequestEntry[];
  /** Pending ids that are not request entries any more (deleted): to be acknowledged. */
  readonly invalid: readonly string[];
}

/**
 * Claims, for `consumer`, up to `count` entries that their worker has held unanswered for `claimIdleMs`
 * (`XAUTOCLAIM`, which counts a delivery), and sorts out those delivered too often (`XPENDING` holds the counts).
 *
 * @example
 * ```ts
 * const claim = await claimIdle(commands, keys, workerId, { claimIdleMs: 5_000, cursor: '0-0', count: 8, maxDeliveries: 3 });
 * ```
 */
export async function claimIdle(
  commands: Connection,
  keys: QueueKeys,
  consumer: string,
  options: {
    readonly claimIdleMs: number;
    readonly cursor: string;
    readonly count: number;
    readonly maxDeliveries: number;
  },
): Promise<Claim> {
  const reply = (await commands.sendCommand([
    'XAUTOCLAIM',
    keys.requests,
    keys.group,
    consumer,
    String(Math.ceil(options.claimIdleMs)),
    options.cursor,
    'COUNT',
    String(options.count),
  ])) as unknown as [string, unknown, unknown];
  const claimed: RequestEntry[] = [];
  const invalid: string[] = [];
  for (const [id, fields] of rawEntries(reply[1])) {
    const entry = toRequestEntry(id, entryTimeMs(id), fields);
    if (entry === undefined) invalid.push(id);
    else claimed.push(entry);
  }
  if (claimed.length === 0) return { cursor: String(reply[0]), entries: [], poisoned: [], invalid };
  const pending = (await commands.sendCommand([
    'XPENDING',
    keys.requests,
    keys.group,
    claimed[0]?.entryId ?? '-',
    claimed.at(-1)?.entryId ?? '+',
    String(claimed.length * 2),
    consumer,
  ])) as unknown as Array<[string, string, number, number]>;
  const deliveries = new Map(pending.map(([id, , , count]) => [String(id), Number(count)]));
  const poisoned = claimed.filter((entry) => (deliveries.get(entry.entryId) ?? 0) > options.maxDeliveries);
  return { cursor: String(reply[0]), entries: claimed.filter((entry) => !poisoned.includes(entry)), poisoned, invalid };
}

/**
 * Resets the idle time of entries `consumer` is running (`XCLAIM … JUSTID`, which counts no delivery), so a long
 * batch is never taken over by another worker.
 */
export async function refreshHeld(
  commands: Connection,
  keys: QueueKeys,
  consumer: string,
  ids: readonly string[],
): Promise<void> {
  if (ids.length === 0) return;
  await commands.sendCommand(['XCLAIM', keys.requests, keys.group, consumer, '0', ...ids, 'JUSTID']);
}
