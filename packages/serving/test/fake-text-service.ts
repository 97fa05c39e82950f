// The one fake text-completion service the serving tests build on: a `TextCompletionService` over the test's own
// `generate` batcher (what holds, gates or answers at once is the test's), with a streamer that ends every stream at
// once. Tests of the apps need only the service's shape; what the model does is the batcher they pass.
import { type Batcher, type BatcherOptions, createBatcher, createStreamingBatcher, END } from '@microbatch/core';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { createTextGenerationParser } from '@microbatch/inference';
import type { TextCompletionService } from '../src/index.js';

/** The usage every fake answer reports. */
export const FAKE_USAGE = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };

/** A service named `id` over `generate`; its streamer (`maxConcurrentBatches` as given) answers empty streams. */
export function fakeTextService(
  generate: Batcher<TextGenerationInput, TextGenerationOutput>,
  options: { readonly id?: string; readonly streamerSlots?: number } = {},
): TextCompletionService {
  const streamer = createStreamingBatcher(
    async function* (inputs: TextGenerationInput[]) {
      yield inputs.map((): TextGenerationChunk => ({ text: '', finish_reason: 'length', usage: FAKE_USAGE }));
      yield inputs.map(() => END);
    },
    {
      name: 'streamer',
      ...(options.streamerSlots === undefined ? {} : { maxConcurrentBatches: options.streamerSlots }),
    },
  );
  const close = async () => {
    await Promise.all([generate.close(), streamer.close()]);
  };
  return {
    id: options.id ?? 'fake',
    generate,
    streamer,
    batchers: [generate, streamer],
    ready: Promise.resolve(),
    isReady: () => true,
    validate: createTextGenerationParser(),
    drain: close,
    close,
  };
}

/** A `generate` batcher that answers `text` to every input at once. */
export function instantGenerate(
  text = ' done',
  options: BatcherOptions<TextGenerationInput> = {},
): Batcher<TextGenerationInput, TextGenerationOutput> {
  return createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> =>
      inputs.map(() => ({ text, finish_reason: 'length', usage: FAKE_USAGE })),
    { name: 'generate', maxBatchSize: 4, ...options },
  );
}
