// `microbatch serve`'s access flags turned into the app's options, without a server: where keys come from, which
// fairness key each `--fairness-key` gives, and what is refused (never quoting a key).
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { fairnessKeyFlag, loadAccess } from '../src/access-flags.js';

const logger = { info: () => undefined, error: () => undefined };
const fail = (message: string): never => {
  throw new Error(message);
};
const req = (headers: Record<string, string>, remoteAddress = '127.0.0.9') =>
  ({ headers, socket: { remoteAddress } }) as unknown as IncomingMessage;

describe('--fairness-key', () => {
  it('parses address, api-key and header:NAME, and refuses anything else', () => {
    expect(fairnessKeyFlag('address')).toBe('address');
    expect(fairnessKeyFlag('api-key')).toBe('api-key');
    expect(fairnessKeyFlag('header:x-tenant')).toBe('header:x-tenant');
    for (const bad of ['user', 'header:', 'header:bad name', '']) {
      expect(() => fairnessKeyFlag(bad)).toThrow(InvalidArgumentError);
    }
  });

  it('gives the address without keys, the key name with keys, or the header a proxy set', () => {
    const none = loadAccess({}, {}, logger, fail);
    expect([none.fairnessKey, none.keyNames, none.options.apiKeys]).toEqual(['address', null, undefined]);
    expect(none.options.clientKey?.(req({}))).toBe('127.0.0.9');
    const keyed = loadAccess({ apiKey: ['sk-a'] }, { MICROBATCH_API_KEY: 'sk-env' }, logger, fail);
    expect(keyed.fairnessKey).toBe('api-key');
    expect(keyed.keyNames).toHaveLength(2);
    const header = loadAccess({ fairnessKey: 'header:x-tenant' }, {}, logger, fail);
    expect(header.options.clientKey?.(req({ 'x-tenant': 'acme' }))).toBe('x-tenant:acme');
    expect(header.options.clientKey?.(req({}))).toBe('127.0.0.9');
  });

  it('reads a key file with names, and refuses what would do nothing or a bad file, never quoting a key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'access-'));
    writeFileSync(join(dir, 'keys'), 'team-a:sk-secret-1\n');
    expect(loadAccess({ apiKeyFile: join(dir, 'keys') }, {}, logger, fail).keyNames).toEqual(['team-a']);
    writeFileSync(join(dir, 'bad'), 'team a:sk-secret-2\n');
    expect(() => loadAccess({ apiKeyFile: join(dir, 'bad') }, {}, logger, fail)).toThrow(/line 1: /);
    expect(() => loadAccess({ apiKeyFile: join(dir, 'bad') }, {}, logger, fail)).not.toThrow(/sk-secret-2/);
    expect(() => loadAccess({ apiKeyFile: join(dir, 'missing') }, {}, logger, fail)).toThrow(/cannot read it/);
    expect(() => loadAccess({ protectMetrics: true }, {}, logger, fail)).toThrow(/--protect-metrics has no effect/);
    expect(() => loadAccess({ fairnessKey: 'api-key' }, {}, logger, fail)).toThrow(/needs API keys/);
  });
});
