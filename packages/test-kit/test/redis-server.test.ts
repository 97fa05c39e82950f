// The throwaway redis-server: a restart is empty by default, and keeps every acknowledged write with `appendOnly`.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startRedisServer } from '../src/index.js';

/** One reply from the server, through the `redis-cli` that comes with `redis-server`. */
function redisCli(port: number, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-p', String(port), ...args], (error, stdout) =>
      error ? reject(error) : resolve(stdout.trim()),
    );
  });
}

describe('startRedisServer', () => {
  it('comes back empty from a kill by default', async () => {
    const redis = await startRedisServer();
    try {
      expect(redis.appendOnly).toBe(false);
      await redisCli(redis.port, ['SET', 'key', 'value']);
      await redis.kill();
      await redis.restart();
      expect(await redisCli(redis.port, ['GET', 'key'])).toBe('');
    } finally {
      await redis.stop();
    }
  });

  it('comes back from a kill with its data when it keeps an AOF, and removes the AOF folder on stop', async () => {
    const redis = await startRedisServer({ appendOnly: true });
    let dir = '';
    try {
      expect(redis.appendOnly).toBe(true);
      dir = (await redisCli(redis.port, ['CONFIG', 'GET', 'dir'])).split('\n')[1] ?? '';
      await redisCli(redis.port, ['XADD', 'stream', '*', 'field', 'value']);
      await redis.kill();
      await redis.restart();
      expect(await redisCli(redis.port, ['XLEN', 'stream'])).toBe('1');
      expect(existsSync(dir)).toBe(true);
    } finally {
      await redis.stop();
    }
    expect(existsSync(dir)).toBe(false);
  });

  it('refuses options that are not an object or an appendOnly that is not a boolean', async () => {
    await expect(startRedisServer(null as never)).rejects.toThrow('Expected `options` to be an object, got null');
    await expect(startRedisServer({ appendOnly: 'yes' as never })).rejects.toThrow(
      'Expected `appendOnly` to be a boolean, got string',
    );
  });
});
