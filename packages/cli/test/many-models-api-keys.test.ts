// `microbatch serve --config FILE --api-key`: the multi-model app checks keys as every app does (401 in OpenAI's
// shape for a missing or wrong key, the answer with the right one, probes open), with the official `openai` client;
// the Batch API's flags, not wired into it yet, are refused rather than ignored.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const STORIES = fileURLToPath(new URL('../../../models/tinystories-656k', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const KEY = 'sk-many-models-5e1a';

let scratch: string;
let config: string;
let server: ServerProcess;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-many-keys-'));
  config = join(scratch, 'models.yaml');
  await writeFile(config, `models:\n  - { name: stories, path: ${STORIES}, task: text-generation }\n`);
  server = await startServerProcess({
    args: [BIN, 'serve', '--config', config, '--port', '0', '--log-format', 'json', '--api-key', KEY],
    env: { ...process.env },
    ready: READY,
  });
});

afterAll(async () => {
  await server?.stop();
  await rm(scratch, { recursive: true, force: true });
});

describe('microbatch serve --config --api-key', () => {
  it('answers the right key and refuses a wrong or missing one with 401', async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const answer = await client.completions.create({ model: 'stories', prompt: 'Once upon', max_tokens: 4 });
    expect(answer.choices[0]?.text.length).toBeGreaterThan(0);
    const wrong = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    await expect(wrong.completions.create({ model: 'stories', prompt: 'Once', max_tokens: 4 })).rejects.toThrow(
      OpenAI.AuthenticationError,
    );
    await expect(wrong.models.list()).rejects.toThrow(OpenAI.AuthenticationError);
    const bare = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stories', prompt: 'Once' }),
    });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toBe('Bearer');
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('refuses --data-dir with --config, naming it', async () => {
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [BIN, 'serve', '--config', config, '--data-dir', join(scratch, 'data')],
        { timeout: 60_000 },
        (error, _stdout, stderr) =>
          resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stderr }),
      );
    });
    expect(code).not.toBe(0);
    expect(stderr).toContain('--data-dir is not supported with --config yet');
  });
});
