// The worker-side check of one text-generation input, shared by both schedulings. Inputs may come straight from a
// caller of `pool.run()`, so the runner checks every field itself; the HTTP-side parser
// (`text-generation-request.ts`) uses the same field checks, so both reject the same inputs with the same messages.
import { InputError } from '../pool/protocol.js';
import type { TextGenerationRunnerSpec } from '../spec/runner-types.js';
import { checkGenerationFields, contextLimitError } from '../requests/text-generation-fields.js';

/** One checked request with the runner's defaults applied. */
export interface GenerationRequest {
  /** The prompt's token ids (BOS included), tokenized once for both the context check and the model. */
  readonly ids: readonly number[];
  readonly maxNewTokens: number;
  readonly temperature: number;
  readonly topP: number;
  readonly stop: readonly string[];
  /** The request's own seed, if it gave one. */
  readonly seed: number | undefined;
  /** How many alternatives to report per token, if it asked for log-probabilities. */
  readonly logprobs: number | undefined;
}

/** Checks one input against the spec's defaults and the model's context; throws `InputError` naming the field. */
export function checkGenerationInput(
  input: unknown,
  spec: Required<TextGenerationRunnerSpec>,
  encode: (text: string) => readonly number[],
  contextLength: number,
): GenerationRequest {
  const fields = checkGenerationFields(
    input,
    'max_new_tokens',
    (field, message) => new InputError(field, message),
    {},
    'a text-generation input',
  );
  const maxNewTokens = fields.maxTokens ?? spec.maxNewTokens;
  const ids = encode(fields.prompt);
  const overflow = contextLimitError(ids.length, maxNewTokens, contextLength, 'max_new_tokens');
  if (overflow !== undefined) throw new InputError(overflow.field, overflow.message);
  return {
    ids,
    maxNewTokens,
    temperature: fields.temperature ?? spec.temperature,
    topP: fields.topP ?? spec.topP,
    stop: [...spec.stop, ...(fields.stop ?? [])],
    seed: fields.seed,
    logprobs: fields.logprobs,
  };
}
