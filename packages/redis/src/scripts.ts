import { createHash } from 'node:crypto';

// Lua scripts, so each step is one atomic round trip. `TIME` is Redis's clock: web replicas and workers on
// different machines compare deadlines and heartbeats on one clock, whatever their own clocks say.

const NOW = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
`;

/** How many fields a request entry has (see `requestFields`): {@link ENQUEUE} takes them in groups of this many. */
export const REQUEST_FIELD_COUNT = 14;

/**
 * KEYS: requests, workers, replicas. ARGV: maxQueueSize, heartbeatTtlMs, reply stream, entry count, then each
 * entry's {@link REQUEST_FIELD_COUNT} field values. Admits the whole group or none of it: `{-1, 0}` when no worker
 * heartbeated within the ttl (nobody would take the entries), `{0, length}` when the group does not fit under the
 * global bound, else `{1, id, ...}`. Records the replica's heartbeat (its expiry), so no entry exists without one.
 */
export const ENQUEUE = `${NOW}
local ttl = tonumber(ARGV[2])
if redis.call('ZCOUNT', KEYS[2], now - ttl, '+inf') == 0 then return {-1, 0} end
local count = tonumber(ARGV[4])
local length = redis.call('XLEN', KEYS[1])
if length + count > tonumber(ARGV[1]) then return {0, length} end
redis.call('ZADD', KEYS[3], now + ttl, ARGV[3])
redis.call('PEXPIRE', KEYS[3], ttl * 10)
local ids = {1}
for k = 0, count - 1 do
  local at = 5 + k * ${REQUEST_FIELD_COUNT}
  ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', unpack(ARGV, at, at + ${REQUEST_FIELD_COUNT} - 1))
end
return ids
`;

/**
 * KEYS: workers, worker settings. ARGV: worker id, ttl ms, the worker's settings as JSON. Records the heartbeat and
 * what the worker runs with; returns Redis's time in ms.
 */
export const HEARTBEAT = `${NOW}
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return now
`;

/**
 * KEYS: workers, worker settings, requests, replicas, replica loads. ARGV: heartbeat ttl ms, this replica's reply
 * stream (or ''), group, this replica's load (items in flight per fairness key, JSON). Forgets workers silent for
 * longer than the ttl and the loads of replicas whose heartbeat expired, records the replica's heartbeat (its
 * expiry) and load, and returns `{alive, entries in the stream, entries delivered and not yet answered, Redis's time
 * (ms), n, the other live replicas' n loads..., settings JSON of each live worker...}`.
 */
export const PROBE = `${NOW}
local ttl = tonumber(ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
end
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[4], now + ttl, ARGV[2])
  redis.call('PEXPIRE', KEYS[4], ttl * 10)
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[5], ttl * 10)
end
local alive = redis.call('ZRANGE', KEYS[1], 0, -1)
local pending = 0
local summary = redis.pcall('XPENDING', KEYS[3], ARGV[3])
if type(summary) == 'table' and summary[1] then pending = summary[1] end
local loads = {}
local all = redis.call('HGETALL', KEYS[5])
for k = 1, #all, 2 do
  local expires = redis.call('ZSCORE', KEYS[4], all[k])
  if not expires or tonumber(expires) < now then
    redis.call('HDEL', KEYS[5], all[k])
  elseif all[k] ~= ARGV[2] and all[k + 1] ~= '{}' then
    loads[#loads + 1] = all[k + 1]
  end
end
local reply = {#alive, redis.call('XLEN', KEYS[3]), pending, now, #loads}
for k = 1, #loads do reply[#reply + 1] = loads[k] end
if #alive > 0 then
  local settings = redis.call('HMGET', KEYS[2], unpack(alive))
  for k = 1, #settings do reply[#reply + 1] = settings[k] or '' end
end
return reply
`;

/**
 * KEYS: requests, replicas. ARGV: group, cursor (an entry id, exclusive; '-' from the start), count. Scans up to
 * `count` entries from the cursor and drops (acknowledges and deletes) those whose deadline passed or whose replica
 * is gone (its heartbeat expired: nobody waits for their answers). Returns `{next cursor ('-' at the end), expired,
 * orphaned}`: a worker runs it every heartbeat, so dead entries never hold the global bound for long.
 */
export const SWEEP = `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
local start = ARGV[2] == '-' and '-' or '(' .. ARGV[2]
local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', tonumber(ARGV[3]))
local expired, orphaned = 0, 0
for _, entry in ipairs(entries) do
  local id, fields = entry[1], entry[2]
  local reply, timeout = nil, ''
  for k = 1, #fields, 2 do
    if fields[k] == 'r' then reply = fields[k + 1] elseif fields[k] == 't' then timeout = fields[k + 1] end
  end
  local drop = false
  if timeout ~= '' and tonumber(string.match(id, '^(%d+)')) + tonumber(timeout) <= now then
    expired = expired + 1
    drop = true
  elseif reply ~= nil and not redis.call('ZSCORE', KEYS[2], reply) then
    orphaned = orphaned + 1
    drop = true
  end
  if drop then
    redis.pcall('XACK', KEYS[1], ARGV[1], id) -- the group may be gone with a restarted Redis
    redis.call('XDEL', KEYS[1], id)
  end
end
local cursor = '-'
if #entries == tonumber(ARGV[3]) then cursor = entries[#entries][1] end
return {cursor, expired, orphaned}
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

/**
 * KEYS: the reply stream, the entry's progress key. ARGV: ttl ms, the token ids as text ("1,2,3,"), then the
 * reply's field values. Adds a resumable stream's chunk and records its tokens in one step, so a worker that takes
 * the stream over resumes after exactly the chunks its replica will have read.
 */
export const CHUNK = `
redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
redis.call('APPEND', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
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
  send: (args: Array<string | Buffer>) => Promise<unknown>,
  script: string,
  sha: string,
  keys: readonly string[],
  args: ReadonlyArray<string | Buffer>,
): Promise<unknown> {
  const rest = [String(keys.length), ...keys, ...args];
  try {
    return await send(['EVALSHA', sha, ...rest]);
  } catch (error) {
    if (!String((error as Error)?.message).startsWith('NOSCRIPT')) throw error;
    return send(['EVAL', script, ...rest]);
  }
}
