// The one connection of a Redis Batch API store, as the store's parts use it: plain commands, commands whose
// replies are bytes, and Lua scripts; a command that fails because Redis is unreachable is a 503 `UNAVAILABLE`.
import { unavailable } from '@microbatch/transport';
import { RESP_TYPES } from 'redis';
import { type Connection, isConnectionError } from './connection.js';
import { runScript, scriptSha } from './scripts.js';

/** Replies' bulk strings as `Buffer`s (blob chunks are bytes, not UTF-8). */
const AS_BUFFERS = { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } } as const;

/**
 * Commands on one connection.
 *
 * @example
 * ```ts
 * const redis = new RedisCommands(connection);
 * await redis.send(['DEL', 'microbatch:batch:blob:file-abc']);
 * ```
 */
export class RedisCommands {
  readonly #connection: Connection;
  readonly #shas = new Map<string, string>();

  constructor(connection: Connection) {
    this.#connection = connection;
  }

  /** Runs one command; its reply as node-redis gives it in RESP2 (strings, numbers, arrays, null). */
  send(args: ReadonlyArray<string | Buffer>): Promise<unknown> {
    return this.#guard(() => this.#connection.sendCommand(args));
  }

  /** Runs one command whose reply is a list of bulk strings, as bytes. */
  async buffers(args: ReadonlyArray<string | Buffer>): Promise<Buffer[]> {
    return this.#guard(() => this.#connection.sendCommand<Buffer[]>(args, AS_BUFFERS));
  }

  /** Runs a Lua script by its SHA-1 (sending its body only when Redis does not know it). */
  script(script: string, keys: readonly string[], args: ReadonlyArray<string | Buffer>): Promise<unknown> {
    let sha = this.#shas.get(script);
    if (sha === undefined) {
      sha = scriptSha(script);
      this.#shas.set(script, sha);
    }
    const known = sha;
    return this.#guard(() => runScript((command) => this.#connection.sendCommand(command), script, known, keys, args));
  }

  async #guard<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      if (isConnectionError(error)) throw unavailable('The Batch API store (Redis) is unreachable', 1, error);
      throw error;
    }
  }
}
