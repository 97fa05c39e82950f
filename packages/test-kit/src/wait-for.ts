/**
 * Polls `condition` until it holds; fails with `what` if it never does within `limitMs`. A hang guard for state the
 * test cannot await directly (a queue length, a closed response), never a timing assertion.
 *
 * @example
 * ```ts
 * await waitFor('2 queued requests', () => route.batcher.queueLength === 2);
 * ```
 */
export async function waitFor(what: string, condition: () => boolean, limitMs = 30_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/**
 * Reads with `read` every `everyMs` until `done(value)` holds or `limitMs` passes; returns the last value read and
 * whether it was done.
 *
 * @example
 * ```ts
 * const { ok } = await pollUntil(() => fetchStats(url), (stats) => stats.queueLength === 0, 10_000);
 * ```
 */
export async function pollUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  limitMs: number,
  everyMs = 100,
): Promise<{ value: T; ok: boolean }> {
  const deadline = performance.now() + limitMs;
  for (;;) {
    const value = await read();
    if (done(value)) return { value, ok: true };
    if (performance.now() > deadline) return { value, ok: false };
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
