import { fileURLToPath } from 'node:url';
import { type ChildHandle, pollUntil, startProcess } from '@microbatch/test-kit';
import { createClient } from 'redis';

/** Polls `check` until it holds; a hang guard for state in Redis, never a timing assertion. */
export async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const { ok } = await pollUntil(async () => await check(), Boolean, 60_000, 10);
  if (!ok) throw new Error(`Gave up waiting for ${what}`);
}

/** A plain connection to look at the queue's keys. */
export async function inspect(url: string) {
  const client = createClient({ url, RESP: 2 });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Entries in a queue's request stream (queued or running). */
export async function queueLength(url: string, queue: string): Promise<number> {
  const client = await inspect(url);
  try {
    return Number(await client.sendCommand(['XLEN', `microbatch:${queue}:requests`]));
  } finally {
    client.destroy();
  }
}

/** A worker in its own process (fixtures/crashing-worker.ts), which can be SIGKILLed. */
export interface ChildWorker {
  readonly process: ChildHandle;
  /** The inputs of its `index`-th batch, once it has started. */
  batch(index: number): Promise<string[]>;
}

/** A web replica in its own process (fixtures/replica.ts) that queued `COUNT` items, which can be SIGKILLed. */
export async function startChildReplica(env: Record<string, string>): Promise<ChildHandle> {
  const script = fileURLToPath(new URL('./fixtures/replica.ts', import.meta.url));
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const child = startProcess({ args: ['--import', 'tsx', script], cwd: root, env: { ...process.env, ...env } });
  await child.nextJson((line) => typeof (line as { ready?: unknown }).ready === 'string', 60_000);
  return child;
}

export async function startChildWorker(env: Record<string, string>): Promise<ChildWorker> {
  const script = fileURLToPath(new URL('./fixtures/crashing-worker.ts', import.meta.url));
  // From the repository root, whose tsconfig.json maps `@microbatch/*` to the sources.
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const child = startProcess({ args: ['--import', 'tsx', script], cwd: root, env: { ...process.env, ...env } });
  await child.nextJson((line) => typeof (line as { ready?: unknown }).ready === 'string', 60_000);
  const batches = (): string[][] =>
    child
      .jsonLines()
      .flatMap((line) =>
        (line as { batch?: string[] }).batch === undefined ? [] : [(line as { batch: string[] }).batch],
      );
  return {
    process: child,
    batch: async (index) => {
      await until(
        `batch ${index} of the child worker`,
        () => batches().length > index || child.exitInfo() !== undefined,
      );
      const batch = batches()[index];
      if (batch === undefined) throw new Error(`The child worker exited before its batch ${index}:\n${child.output()}`);
      return batch;
    },
  };
}
