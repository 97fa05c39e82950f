// `microbatch serve`'s Batch API flags: each refused where it would have no effect, naming it; accepted with
// `--data-dir`, or `--batch-api` with `--queue`. In process, through `createProgram` (nothing starts: the commands are stubs).
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { createProgram } from '../src/program.js';
import type { ServeFlags } from '../src/program.js';

async function parse(args: readonly string[]): Promise<{ flags?: ServeFlags; error?: string }> {
  let flags: ServeFlags | undefined;
  const created: Command = createProgram(
    async (given) => {
      flags = given;
    },
    async () => undefined,
  );
  for (const command of [created, ...created.commands]) {
    command.exitOverride().configureOutput({ writeErr: () => undefined, writeOut: () => undefined });
  }
  try {
    await created.parseAsync([...args], { from: 'user' });
    return { flags };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

const SERVE = ['serve', '--model', 'models/x'];

describe('microbatch serve: Batch API flags', () => {
  it('passes --data-dir, --max-upload-mb and --batch-max-in-flight through', async () => {
    const { flags, error } = await parse([
      ...SERVE,
      '--data-dir',
      '/tmp/d',
      '--max-upload-mb',
      '2',
      '--batch-max-in-flight',
      '3',
    ]);
    expect(error).toBeUndefined();
    expect(flags).toMatchObject({ dataDir: '/tmp/d', maxUploadMb: 2, batchMaxInFlight: 3 });
  });

  it('refuses the bounds without --data-dir, naming them', async () => {
    expect((await parse([...SERVE, '--max-upload-mb', '2'])).error).toBe(
      'error: --max-upload-mb has no effect without --data-dir or --batch-api',
    );
    expect((await parse([...SERVE, '--batch-max-in-flight', '2'])).error).toBe(
      'error: --batch-max-in-flight has no effect without --data-dir or --batch-api',
    );
  });

  it('takes --data-dir with --task feature-extraction (the embeddings Batch API)', async () => {
    const { flags, error } = await parse([...SERVE, '--data-dir', '/tmp/d', '--task', 'feature-extraction']);
    expect(error).toBeUndefined();
    expect(flags).toMatchObject({ dataDir: '/tmp/d', task: 'feature-extraction' });
  });

  it('refuses --data-dir with --queue (pointing to --batch-api), and bad values', async () => {
    expect((await parse([...SERVE, '--data-dir', '/tmp/d', '--queue', 'redis://127.0.0.1:1'])).error).toContain(
      'with --queue use --batch-api',
    );
    expect((await parse([...SERVE, '--data-dir', '/tmp/d', '--max-upload-mb', '0'])).error).toContain('MiB > 0');
    expect((await parse([...SERVE, '--data-dir', '/tmp/d', '--batch-max-in-flight', '0'])).error).toBeDefined();
  });

  it('takes --batch-api with --queue (and the bounds with it); refuses it without --queue and with --config', async () => {
    const queued = await parse([...SERVE, '--queue', 'redis://127.0.0.1:1', '--batch-api', '--max-upload-mb', '2']);
    expect(queued.error).toBeUndefined();
    expect(queued.flags).toMatchObject({ batchApi: true, queue: 'redis://127.0.0.1:1', maxUploadMb: 2 });
    expect((await parse([...SERVE, '--batch-api'])).error).toBe(
      'error: --batch-api applies with --queue only (the Batch API of a server on its own is --data-dir <dir>)',
    );
    expect((await parse(['serve', '--config', 'x.yaml', '--batch-api'])).error).toBe(
      'error: --batch-api is not supported with --config yet',
    );
    expect((await parse([...SERVE, '--task', 'rerank', '--batch-api'])).error).toBe(
      'error: --batch-api does not apply to --task rerank',
    );
  });
});
