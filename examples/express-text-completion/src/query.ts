// The tutorial's 9 parallel queries: `pnpm query` (root) or `pnpm --filter express-text-completion query [URL]`
// against a running server (default http://127.0.0.1:8000). Prints each story and the batch it rode in: under
// continuous scheduling (the default) the decode-loop step it shared with the most others, and how many shared it.
import { pathToFileURL } from 'node:url';

/** The tutorial's nine prompts, in its order (../shared/reference/ray-serve-batching-tutorial-text-generator.md). */
export const TUTORIAL_TEXTS = [
  'Once upon a time,',
  'Hi my name is Lewis and I like to',
  'My name is Mary, and my favorite',
  'My name is Clara and I am',
  'My name is Julien and I like to',
  'Today I accidentally',
  'My greatest wish is to',
  'In a galaxy far far away',
  'My best talent is',
] as const;

/**
 * One query's answer and the batch it rode in (from the `X-Batch-Id` / `X-Batch-Size` headers): under continuous
 * scheduling a decode-loop step (`w0-3f2a:57`) and its rows; under request scheduling the batcher's batch.
 */
export interface QueryResult {
  readonly text: string;
  readonly status: number;
  readonly body: string;
  readonly batchId: string;
  readonly batchSize: number;
}

/** Sends every text at once to `GET /?text=` and waits for all answers. Only localhost is queried. */
export async function queryInParallel(
  baseUrl: string,
  texts: readonly string[] = TUTORIAL_TEXTS,
): Promise<QueryResult[]> {
  const base = new URL(baseUrl);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(base.hostname)) {
    throw new TypeError(`Expected a localhost URL, got ${JSON.stringify(baseUrl)}`);
  }
  return Promise.all(
    texts.map(async (text) => {
      const response = await fetch(new URL(`/?text=${encodeURIComponent(text)}`, base));
      return {
        text,
        status: response.status,
        body: await response.text(),
        batchId: response.headers.get('x-batch-id') ?? '',
        batchSize: Number(response.headers.get('x-batch-size')),
      };
    }),
  );
}

/**
 * `batch w0-3f2a:2: size 8 (8 of these queries)`: each batch once, in id order, with how many of the queries carry
 * its id (the size also counts other requests that shared it).
 */
export function describeBatches(results: readonly QueryResult[]): string {
  const batches = new Map<string, { size: number; queries: number }>();
  for (const { batchId, batchSize } of results) {
    const batch = batches.get(batchId) ?? { size: batchSize, queries: 0 };
    batch.queries += 1;
    batches.set(batchId, batch);
  }
  return [...batches]
    .sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))
    .map(([id, { size, queries }]) => `batch ${id}: size ${size} (${queries} of these queries)`)
    .join(', ');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // `pnpm query -- URL` passes the `--` on.
  const url = process.argv.slice(2).find((arg) => arg !== '--');
  const results = await queryInParallel(url ?? process.env.URL ?? 'http://127.0.0.1:8000');
  for (const { status, body, batchId, batchSize } of results) {
    console.log(`[${status}, batch ${batchId} of ${batchSize}] ${body.replaceAll('\n', ' ')}`);
  }
  console.log(`Batches seen: ${describeBatches(results)}`);
}
