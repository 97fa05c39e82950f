// What the `microbatch serve --config` suites share (many-models, many-models-rag): the CLI, the bundled tinystories
// model, a config file written to a scratch folder, a server started on it (killed by the suite), and one model's
// figure read from `/metrics`.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';

/** The CLI's entry. */
export const BIN = fileURLToPath(new URL('../../bin/microbatch.js', import.meta.url));
/** The bundled text-generation model. */
export const STORIES = fileURLToPath(new URL('../../../../models/tinystories-656k', import.meta.url));
/** The JSON log line a server prints once it listens, with its URL. */
export const READY = /"url":"(http:[^"]+)","msg":"ready"/;

/**
 * Writes `text` as `dir/name` and returns its path.
 *
 * @example
 * ```ts
 * const config = await configFile(scratch, 'two.yaml', 'models:\n  - { name: a, path: ..., task: rerank }\n');
 * ```
 */
export async function configFile(dir: string, name: string, text: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, text);
  return file;
}

/**
 * `microbatch serve --config config` on a free port with JSON logs (and `extra` flags), once it is ready.
 *
 * @example
 * ```ts
 * const server = await serveConfig(config, ['--framework', 'nest']);
 * ```
 */
export function serveConfig(config: string, extra: readonly string[] = []): Promise<ServerProcess> {
  return startServerProcess({
    args: [BIN, 'serve', '--config', config, '--port', '0', '--log-format', 'json', ...extra],
    env: { ...process.env },
    ready: READY,
  });
}

/**
 * A counter or gauge of `/metrics` for one model.
 *
 * @example
 * ```ts
 * await modelMetric(server, 'microbatch_model_loads_total', 'story-a'); // 1
 * ```
 */
export async function modelMetric(server: ServerProcess, metric: string, model: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((row) => row.startsWith(`${metric}{model="${model}"}`));
  if (line === undefined) throw new Error(`no ${metric} for ${model} in /metrics`);
  return Number(line.split(' ')[1]);
}
