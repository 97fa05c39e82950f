// Request scheduling of a decoder exported without a KV cache (no `past_key_values.*` inputs). transformers.js's
// `generate()` feeds only each step's new token after the first step (its cache object exists, empty, and the next
// call's `input_ids` are the new tokens alone), which such a graph cannot attend from: it must be given the whole
// sequence every step. This keeps `generate()`'s loop (sampling, stopping, the runner's rows) and changes only what
// the next step is fed: the previous step's ids and the new token, so each call recomputes the sequence.
import { cat } from '@huggingface/transformers';
import type { AutoModelForCausalLM, Tensor } from '@huggingface/transformers';

type Model = Awaited<ReturnType<typeof AutoModelForCausalLM.from_pretrained>>;

/** `_update_model_kwargs_for_generation`'s argument and result: the next step's model inputs. */
interface NextInputs {
  readonly model_inputs: { input_ids: Tensor };
}
type UpdateInputs = (args: NextInputs) => { input_ids: Tensor };

/** Whether a loaded model's decoder session takes a KV cache. */
function takesKvCache(model: Model): boolean {
  const sessions = Object.values((model as unknown as { sessions: Record<string, { inputNames: string[] }> }).sessions);
  return sessions.some((session) => session.inputNames.some((name) => name.startsWith('past_key_values.')));
}

/**
 * Makes `model.generate()` feed a decoder without a KV cache its whole sequence at every step. Returns whether the
 * model needed it (a model with a KV cache is left as it is).
 *
 * @example
 * ```ts
 * const model = await AutoModelForCausalLM.from_pretrained(id, options);
 * recomputeWithoutKvCache(model); // true for an export made without past key values
 * ```
 */
export function recomputeWithoutKvCache(model: Model): boolean {
  if (takesKvCache(model)) return false;
  const target = model as unknown as { _update_model_kwargs_for_generation: UpdateInputs };
  const update = target._update_model_kwargs_for_generation.bind(model);
  target._update_model_kwargs_for_generation = (args) => {
    const previous = args.model_inputs.input_ids;
    const next = update(args);
    next.input_ids = cat([previous, next.input_ids], 1);
    return next;
  };
  return true;
}
