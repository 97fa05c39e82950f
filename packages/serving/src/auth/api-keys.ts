// Who may call the serving apps: the operator's API keys, each with a name that stands for it everywhere a key must
// not appear (fairness keys, metrics labels, logs, the prefix cache's tenant). Keys are kept only as SHA-256
// digests and compared in constant time; a key set can be replaced whole (a key file re-read on SIGHUP).
import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * One API key and the name it goes by (in fairness keys, metrics labels and logs; never the key).
 *
 * @example
 * ```ts
 * const entry: ApiKeyEntry = { name: 'team-a', key: 'sk-team-a-3f9c' };
 * ```
 */
export interface ApiKeyEntry {
  readonly name: string;
  readonly key: string;
}

/**
 * A key as the apps take it: a bare key (its name is then `key-` and the first 8 hex digits of its SHA-256, so a
 * name never shows the key) or a named one.
 *
 * @example
 * ```ts
 * const keys: ApiKeyInput[] = ['sk-local-1', { name: 'team-b', key: 'sk-team-b-77aa' }];
 * ```
 */
export type ApiKeyInput = string | ApiKeyEntry;

/** What a key may hold: visible ASCII without spaces, as RFC 6750's `b64token` and every OpenAI key fit. */
const KEY_PATTERN = /^[\x21-\x7e]{1,512}$/;
/** What a key's name may hold: it becomes a metrics label and a fairness key. */
const NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** The longest `Authorization` header read; a longer one is refused unread (no key is that long). */
const MAX_HEADER_LENGTH = 1024;

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * The name a bare key goes by: `key-` and the first 8 hex digits of its SHA-256 (stable across restarts and key-file
 * reloads, and not the key).
 *
 * @example
 * ```ts
 * defaultKeyName('sk-local-1'); // 'key-' + 8 hex digits
 * ```
 */
export function defaultKeyName(key: string): string {
  return `key-${digest(key).toString('hex').slice(0, 8)}`;
}

/** The checked entries of `keys`: each key well-formed, no key or name twice. Throws `TypeError` naming the fault. */
function checkEntries(keys: unknown): ApiKeyEntry[] {
  // Not `fail()`: it would quote the value, and a key passed the wrong way must not reach a log.
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new TypeError('apiKeys must be a non-empty array of keys (strings or { name, key }) or an ApiKeys');
  }
  const entries: ApiKeyEntry[] = [];
  const names = new Set<string>();
  const seen = new Set<string>();
  for (const [index, input] of (keys as unknown[]).entries()) {
    const entry =
      typeof input === 'string'
        ? { name: defaultKeyName(input), key: input }
        : typeof input === 'object' && input !== null
          ? { name: (input as ApiKeyEntry).name, key: (input as ApiKeyEntry).key }
          : undefined;
    // The key itself is never quoted in an error: it would reach logs.
    if (entry === undefined || typeof entry.key !== 'string' || !KEY_PATTERN.test(entry.key)) {
      throw new TypeError(
        `apiKeys[${index}]: a key must be 1 to 512 visible ASCII characters without spaces (the key is not shown)`,
      );
    }
    if (typeof entry.name !== 'string' || !NAME_PATTERN.test(entry.name)) {
      throw new TypeError(`apiKeys[${index}]: a key's name must be 1 to 64 of A-Z a-z 0-9 . _ -`);
    }
    if (names.has(entry.name)) throw new TypeError(`apiKeys[${index}]: the name \`${entry.name}\` is given twice`);
    const hex = digest(entry.key).toString('hex');
    if (seen.has(hex)) throw new TypeError(`apiKeys[${index}]: the same key is given twice (\`${entry.name}\`)`);
    names.add(entry.name);
    seen.add(hex);
    entries.push(entry);
  }
  return entries;
}

/**
 * A set of API keys, checked when made and when replaced. `authenticate` compares the SHA-256 of the token with
 * every key's in constant time (`timingSafeEqual`, never stopping at a match), so neither a key's length nor its
 * prefix shows in the time a refusal takes.
 *
 * @example
 * ```ts
 * const keys = new ApiKeys(['sk-local-1', { name: 'team-b', key: 'sk-team-b-77aa' }]);
 * keys.authenticate('sk-team-b-77aa'); // 'team-b'
 * ```
 */
export class ApiKeys {
  #digests: readonly { readonly name: string; readonly digest: Buffer }[] = [];

  constructor(keys: readonly ApiKeyInput[]) {
    this.replace(keys);
  }

  /** Replaces every key at once; a bad set throws a `TypeError` and keeps the keys there were. */
  replace(keys: readonly ApiKeyInput[]): void {
    this.#digests = checkEntries(keys).map(({ name, key }) => ({ name, digest: digest(key) }));
  }

  /** The keys' names (what a metrics label or a log may show). */
  get names(): readonly string[] {
    return this.#digests.map(({ name }) => name);
  }

  /** The name of the key `token` is, or `undefined`. */
  authenticate(token: string): string | undefined {
    const presented = digest(token);
    let found: string | undefined;
    for (const { name, digest: expected } of this.#digests) {
      if (timingSafeEqual(presented, expected) && found === undefined) found = name;
    }
    return found;
  }

  /**
   * The name of the key an `Authorization` header carries (`Bearer <key>`, the scheme in any case), or `undefined`
   * for a missing, empty, other-scheme or oversized header, or an unknown key.
   */
  authenticateHeader(header: string | undefined): string | undefined {
    if (header === undefined || header.length > MAX_HEADER_LENGTH) return undefined;
    const match = /^Bearer +([^\s]+) *$/i.exec(header);
    return match?.[1] === undefined ? undefined : this.authenticate(match[1]);
  }
}

/**
 * The keys of a key file: one a line, `name:key` or a bare key (split at the first `:`, so a named key may hold `:`
 * but a bare one may not); blank lines and lines starting with `#` are skipped. Throws a `TypeError` naming the line
 * of a bad entry (never quoting the key).
 *
 * @example
 * ```ts
 * parseApiKeyFile('# ops\nteam-a:sk-a\nsk-bare\n'); // [{ name: 'team-a', key: 'sk-a' }, 'sk-bare']
 * ```
 */
export function parseApiKeyFile(text: string): ApiKeyInput[] {
  const keys: ApiKeyInput[] = [];
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    const entry: ApiKeyInput = colon < 0 ? line : { name: line.slice(0, colon), key: line.slice(colon + 1) };
    try {
      checkEntries([entry]);
    } catch (error) {
      throw new TypeError(`line ${index + 1}: ${(error as Error).message.replace(/^apiKeys\[0\]: /, '')}`);
    }
    keys.push(entry);
  }
  if (keys.length === 0) throw new TypeError('the key file holds no key');
  checkEntries(keys);
  return keys;
}

/**
 * The app option's value as one {@link ApiKeys} (the same object when given one, so a key file's reload reaches the
 * app), or `undefined` when keys are off.
 *
 * @example
 * ```ts
 * toApiKeys(['sk-1'])?.names; // ['key-…']
 * ```
 */
export function toApiKeys(value: ApiKeys | readonly ApiKeyInput[] | undefined): ApiKeys | undefined {
  if (value === undefined) return undefined;
  return value instanceof ApiKeys ? value : new ApiKeys(value);
}
