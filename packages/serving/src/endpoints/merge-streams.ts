/**
 * Interleaves several async iterators into one, yielding `[index, value]` as each source produces, so the chunks of
 * several prompts reach the client as soon as they are decoded, whichever prompt they belong to. A source that throws
 * ends the merge with its error; ending early (`return()`, a throw) returns every source still open, which cancels
 * their batched items.
 *
 * @example
 * ```ts
 * for await (const [index, chunk] of mergeStreams(inputs.map((input) => model.streamer.stream(input)))) send(index, chunk);
 * ```
 */
export async function* mergeStreams<T>(
  sources: readonly AsyncIterator<T>[],
): AsyncGenerator<[number, T], void, undefined> {
  type Step = { readonly index: number; readonly step: IteratorResult<T> };
  const pending = new Map<number, Promise<Step>>();
  const pull = (index: number): void => {
    const next = (sources[index] as AsyncIterator<T>).next().then((step): Step => ({ index, step }));
    // Raced later, or never if the merge ends first: a rejection must not go unhandled meanwhile.
    next.catch(() => undefined);
    pending.set(index, next);
  };
  sources.forEach((_, index) => pull(index));
  try {
    while (pending.size > 0) {
      const { index, step } = await Promise.race(pending.values());
      pending.delete(index);
      if (step.done === true) continue;
      pull(index);
      yield [index, step.value];
    }
  } finally {
    await Promise.all(
      [...pending.keys()].map(async (index) => {
        await sources[index]?.return?.();
      }),
    );
  }
}
