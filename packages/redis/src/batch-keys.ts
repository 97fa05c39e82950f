// The Redis keys and Lua scripts of the Batch API's storage (`openRedisBatchStorage`). Each multi-key step is one
// script, so it is atomic: a record and its index entry, a result line and its custom_id, a lease's check and its
// change never drift apart.

/**
 * The keys under `<prefix>:batch:` (port keys are `[A-Za-z0-9_-]`, so they are used as they are):
 * - `blob:<key>`: a list of the blob's chunks (a torn upload lives under `upload:<key>:<uuid>`, expiring, and is
 *   renamed to `blob:<key>` only once complete);
 * - `record:<key>`: a record's JSON; `records`: a sorted set of every record key, all scored 0, for `list` by prefix
 *   with `ZRANGEBYLEX` (touches only the matching keys, unlike `SCAN`, which walks the whole keyspace);
 * - `results:<log>:ids` (hash custom_id → 1), `results:<log>:lines` (list of entries, JSON), `results:<log>:counts`
 *   (hash `ok`, `failed`);
 * - `lease:<key>`: the holder, expiring after the lease's ttl.
 *
 * @example
 * ```ts
 * batchKeys('microbatch').record('batch_abc'); // 'microbatch:batch:record:batch_abc'
 * ```
 */
export function batchKeys(prefix: string) {
  const base = `${prefix}:batch`;
  return {
    blob: (key: string) => `${base}:blob:${key}`,
    upload: (key: string, id: string) => `${base}:upload:${key}:${id}`,
    record: (key: string) => `${base}:record:${key}`,
    recordIndex: `${base}:records`,
    /** The part of a record's key before its port key. */
    recordBase: `${base}:record:`,
    resultIds: (log: string) => `${base}:results:${log}:ids`,
    resultLines: (log: string) => `${base}:results:${log}:lines`,
    resultCounts: (log: string) => `${base}:results:${log}:counts`,
    lease: (key: string) => `${base}:lease:${key}`,
  };
}

export type BatchKeys = ReturnType<typeof batchKeys>;

/**
 * KEYS: upload. ARGV: chunk, ttl ms, chunks pushed so far. Appends a chunk to an upload and keeps the upload alive
 * for `ttl` more; fails when the upload does not hold exactly the chunks pushed so far (it expired while its writer
 * stalled: `RPUSH` would start a new list without the blob's start).
 */
export const PUSH_CHUNK = `
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[3]) then return redis.error_reply('ERR the upload expired') end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

/**
 * KEYS: upload, blob. ARGV: chunks pushed. Makes a complete upload the blob (replacing any older one), for good
 * (no expiry); fails when the upload does not hold every chunk (it expired).
 */
export const FINISH_UPLOAD = `
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return redis.error_reply('ERR the upload expired') end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('PERSIST', KEYS[2])
return 1
`;

/** KEYS: record, index. ARGV: JSON, port key, `nx` ('1': only when absent). Whether it was stored. */
export const PUT_RECORD = `
if ARGV[3] == '1' then
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('ZADD', KEYS[2], 0, ARGV[2])
return 1
`;

/** KEYS: record, index. ARGV: port key. */
export const DELETE_RECORD = `
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`;

/**
 * KEYS: ids, lines, counts. ARGV: custom_id, `1` (ok) or `0`, the entry's JSON. First write per custom_id wins:
 * the line is appended and counted only when `HSETNX` found no entry for it. Whether it was appended.
 */
export const APPEND_RESULT = `
if redis.call('HSETNX', KEYS[1], ARGV[1], '1') == 0 then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[3])
if ARGV[2] == '1' then
  redis.call('HINCRBY', KEYS[3], 'ok', 1)
else
  redis.call('HINCRBY', KEYS[3], 'failed', 1)
end
return 1
`;

/**
 * KEYS: lease. ARGV: holder, ttl ms. Takes a free lease (`SET NX PX`) or renews the holder's own (compare, then
 * `PEXPIRE`) in one step, so a lease that lapses between the two is never renewed for someone else. Whether
 * `holder` has it now.
 */
export const ACQUIRE_LEASE = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;

/** KEYS: lease. ARGV: holder. Deletes the lease only when `holder` has it (compare-and-delete). */
export const RELEASE_LEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;
