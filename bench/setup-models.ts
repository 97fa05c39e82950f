// Writes the generated benchmark models into bench/.models/ (gitignored) unless they are already there.
// Run by the benchmark driver before it starts; `tsx bench/setup-models.ts` runs it alone.
import { existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { embedderModel } from './lib/embedder-model.js';
import { EMBEDDER_MODEL_PATH } from './lib/paths.js';

/** Builds the embeddings model if missing; returns its path. */
export async function setupModels(): Promise<string> {
  if (existsSync(EMBEDDER_MODEL_PATH)) return EMBEDDER_MODEL_PATH;
  await mkdir(dirname(EMBEDDER_MODEL_PATH), { recursive: true });
  // Written under a temporary name first, so an interrupted run never leaves a truncated model behind.
  const partial = `${EMBEDDER_MODEL_PATH}.${process.pid}.partial`;
  await writeFile(partial, embedderModel());
  await rename(partial, EMBEDDER_MODEL_PATH);
  return EMBEDDER_MODEL_PATH;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(await setupModels());
