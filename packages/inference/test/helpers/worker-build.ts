// The pool always starts the BUILT dist/worker.js (Node 20 cannot run a .ts worker). The root `pnpm install`
// builds it; this helper rebuilds the JavaScript when a source file is newer than the build, so editing
// src/ and re-running vitest never tests a stale worker. Parallel test files share one build through a lock.
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const worker = join(root, 'dist', 'worker.js');
const lock = join(root, 'node_modules', '.microbatch-worker-build.lock');
const STALE_LOCK_MS = 120_000;

async function mtime(path: string): Promise<number> {
  return stat(path).then(
    (info) => info.mtimeMs,
    () => Number.NaN,
  );
}

async function newestSource(): Promise<number> {
  const files = await readdir(join(root, 'src'), { recursive: true });
  const times = await Promise.all(
    files.filter((file) => file.endsWith('.ts')).map((file) => mtime(join(root, 'src', file))),
  );
  return Math.max(...times, await mtime(join(root, 'tsup.config.mjs')));
}

async function fresh(): Promise<boolean> {
  const built = await mtime(worker);
  return !Number.isNaN(built) && built >= (await newestSource());
}

async function build(): Promise<void> {
  const { build: tsup } = await import('tsup');
  const config = (await import(join(root, 'tsup.config.mjs'))).default as Record<string, unknown>;
  await tsup({
    ...config,
    entry: (config.entry as string[]).map((entry) => join(root, entry)),
    outDir: join(root, 'dist'),
    // Other test files may be running workers from dist/ right now; keep their files in place.
    clean: false,
    config: false,
    silent: true,
  });
}

/** Makes sure dist/worker.js exists and is at least as new as every source file. */
export async function ensureWorkerBuilt(): Promise<void> {
  if (await fresh()) return;
  for (;;) {
    try {
      await mkdir(lock);
    } catch {
      const age = Date.now() - (await mtime(lock));
      if (age > STALE_LOCK_MS) await rm(lock, { recursive: true, force: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
      if (await fresh()) return;
      continue;
    }
    try {
      if (!(await fresh())) await build();
      return;
    } finally {
      await rm(lock, { recursive: true, force: true });
    }
  }
}

/** Lets vitest use this module as a `globalSetup` entry, so every package's tests get a fresh worker build. */
export default ensureWorkerBuilt;
