// What completions and chat do alike once a request is admitted: its sequences (prompts, choices) run as one group
// through the service's batchers, whole or streamed, with the decode loop's `X-Batch-*` headers and a timer per
// sequence. Each endpoint only turns the outputs or chunks into its own OpenAI answer.
import { setMaxListeners } from 'node:events';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import type { TextCompletionService } from '../service/text-completion-service.js';
import { renameGrammarError } from '../openai/response-format.js';
import { setDecodeBatchHeaders } from './decode-batch-headers.js';
import { mergeStreams } from './merge-streams.js';
import type { EndpointCall } from './openai-endpoint.js';

// Node's default (10) plus what the request itself adds beside its sequences' listeners.
const MAX_LISTENERS_SLACK = 10;

/** A request with generated sequences: one input per prompt or choice. */
export interface GenerationRequest {
  readonly inputs: readonly TextGenerationInput[];
  /** The body field the inputs' grammar came from: the `param` of the worker's errors about it. */
  readonly grammarParam?: string | undefined;
  /** The request's own `cache_salt` (vLLM's): a partition of the prefix cache within its tenant's. */
  readonly cacheSalt?: string | undefined;
}

/**
 * The request's inputs with their prefix-cache partition: the tenant and the request's own `cache_salt`, as one
 * unambiguous string (a JSON pair, so no salt a client picks can name another tenant's partition); none when both
 * are empty (the shared cache).
 *
 * @example
 * ```ts
 * saltedInputs({ inputs, cacheSalt: 'conversation-42' }, 'key:team-a');
 * ```
 */
export function saltedInputs(request: GenerationRequest, tenant = ''): readonly TextGenerationInput[] {
  const own = request.cacheSalt ?? '';
  if (tenant === '' && own === '') return request.inputs;
  const cache_salt = JSON.stringify([tenant, own]);
  return request.inputs.map((input) => ({ ...input, cache_salt }));
}

/**
 * Every sequence of the request as one item, admitted all together or refused together (a request is never half
 * started); a failed sequence cancels its siblings, whose answers are useless. Sets the decode loop's headers and
 * finishes each sequence's timer.
 *
 * @example
 * ```ts
 * const outputs = await generateAll(service, exchange);
 * ```
 */
export async function generateAll(
  service: Pick<TextCompletionService, 'generate'>,
  { request, call, res, timers, tenant }: EndpointCall<GenerationRequest>,
): Promise<TextGenerationOutput[]> {
  const done = new AbortController();
  const signal = call.signal === undefined ? done.signal : AbortSignal.any([call.signal, done.signal]);
  // One abort listener per sequence (up to the request's limit) is expected, not a leak.
  setMaxListeners(request.inputs.length + MAX_LISTENERS_SLACK, signal);
  try {
    const outputs: TextGenerationOutput[] = await service.generate.callAll(saltedInputs(request, tenant), {
      ...call,
      signal,
    });
    setDecodeBatchHeaders(res, outputs);
    outputs.forEach((output, index) => timers?.[index]?.finished(output.usage));
    return outputs;
  } catch (error) {
    for (const timer of timers ?? []) timer.failed(error);
    throw renameGrammarError(error, request.grammarParam);
  } finally {
    done.abort();
  }
}

/**
 * Every sequence of the request streamed, as `[index, chunk]` in the order they are decoded: the decode loop's
 * headers from the first chunk (pulled before the headers go out), each sequence's timer ticked per chunk and
 * finished with its usage.
 *
 * @example
 * ```ts
 * for await (const [index, chunk] of streamAll(service, exchange)) yield toCompletionChunk(meta, index, chunk);
 * ```
 */
export async function* streamAll(
  service: Pick<TextCompletionService, 'streamer'>,
  { request, call, res, timers, tenant }: EndpointCall<GenerationRequest>,
): AsyncGenerator<readonly [number, TextGenerationChunk], void, undefined> {
  if (call.signal !== undefined) setMaxListeners(request.inputs.length + MAX_LISTENERS_SLACK, call.signal);
  let first = true;
  try {
    for await (const [index, chunk] of mergeStreams(service.streamer.streamAll(saltedInputs(request, tenant), call))) {
      if (first) setDecodeBatchHeaders(res, [chunk]);
      first = false;
      const timer = timers?.[index];
      timer?.token();
      if (chunk.usage !== null) timer?.finished(chunk.usage);
      yield [index, chunk];
    }
  } catch (error) {
    for (const timer of timers ?? []) timer.failed(error);
    throw renameGrammarError(error, request.grammarParam);
  } finally {
    // A client that left: its sequences are no longer running (a finished or failed timer ignores this).
    for (const timer of timers ?? []) timer.failed(undefined);
  }
}
