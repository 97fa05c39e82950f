import { createHash } from 'node:crypto';

// Lua scripts, so each step is one atomic round trip. `TIME` is Redis's clock: web replicas and workers on
// different machines compare deadlines and heartbeats on one clock, whatever their own clocks say.

/** KEYS: requests. ARGV: maxQueueSize, then the entry's fields. `{1, id}`, or `{0, length}` when full. */
export const ENQUEUE = `
local length = redis.call('XLEN', KEYS[1])
if length >= tonumber(ARGV[1]) then return {0, length} end
return {1, redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))}
`;

/** KEYS: workers. ARGV: worker id, ttl ms. Records the heartbeat; returns Redis's time in ms. */
export const HEARTBEAT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now
`;

/** KEYS: workers. ARGV: ttl ms. Forgets workers silent for longer than ttl; returns how many are alive. */
export const ALIVE_WORKERS = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
return redis.call('ZCARD', KEYS[1])
`;

/**
 * KEYS: requests, then the reply streams. ARGV: group, reply ttl ms, reply count, then per reply the index of its
 * stream in KEYS and its 8 field values, then the entry ids to acknowledge. Adds every answer, then acknowledges and
 * deletes the entries, in one round trip; if an answer cannot be added the script stops before acknowledging, so the
 * entries stay pending and are run again.
 */
export const ANSWER_AND_ACK = `
local group, ttl, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local at = 4
for _ = 1, count do
  redis.call('XADD', KEYS[tonumber(ARGV[at])], '*', unpack(ARGV, at + 1, at + 8))
  at = at + 9
end
for k = 2, #KEYS do redis.call('PEXPIRE', KEYS[k], ttl) end
if at <= #ARGV then
  redis.call('XACK', KEYS[1], group, unpack(ARGV, at))
  redis.call('XDEL', KEYS[1], unpack(ARGV, at))
end
return count
`;

/** One answer for {@link ANSWER_AND_ACK}: its reply stream and its 8 field values. */
export interface Answer {
  readonly reply: string;
  readonly fields: readonly string[];
}

/** The KEYS and ARGV of {@link ANSWER_AND_ACK}. */
export function answerAndAckArgs(
  requests: string,
  group: string,
  ttlMs: number,
  answers: readonly Answer[],
  ids: readonly string[],
): { keys: string[]; args: string[] } {
  const keys = [requests];
  const index = new Map<string, number>();
  const args = [group, String(Math.ceil(ttlMs)), String(answers.length)];
  for (const { reply, fields } of answers) {
    let at = index.get(reply);
    if (at === undefined) {
      keys.push(reply);
      at = keys.length;
      index.set(reply, at);
    }
    args.push(String(at), ...fields);
  }
  args.push(...ids);
  return { keys, args };
}

/** A script's SHA-1, for `EVALSHA`: the body is sent once per Redis restart, not with every call. */
export function scriptSha(script: string): string {
  return createHash('sha1').update(script).digest('hex');
}

/**
 * Runs `script` with `EVALSHA`, loading it with `EVAL` when Redis does not know it yet (first use, or after a
 * restart).
 */
export async function runScript(
  send: (args: string[]) => Promise<unknown>,
  script: string,
  sha: string,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  const rest = [String(keys.length), ...keys, ...args];
  try {
    return await send(['EVALSHA', sha, ...rest]);
  } catch (error) {
    if (!String((error as Error)?.message).startsWith('NOSCRIPT')) throw error;
    return send(['EVAL', script, ...rest]);
  }
}
