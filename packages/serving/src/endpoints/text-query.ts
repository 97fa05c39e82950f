import { BatchError, ErrorCode, isBatchError } from '@microbatch/core';
import type { TextGenerationInput } from '@microbatch/inference';

/**
 * How `GET /?text=...` generates: greedy, so the tutorial's curl gives the same story every time.
 *
 * @example
 * ```ts
 * TEXT_QUERY_DEFAULTS.max_tokens; // 64
 * ```
 */
export const TEXT_QUERY_DEFAULTS = { max_tokens: 64, temperature: 0 } as const;

/**
 * Turns the `text` query parameter of the tutorial's `GET /?text=Once+upon+a+time` into a generation input,
 * checked by `validate` (a text-completion model's), greedy with {@link TEXT_QUERY_DEFAULTS}; a text that does not end
 * in whitespace gets a trailing space. A missing, repeated or invalid `text` throws `BatchError('INVALID_INPUT')`
 * with `details.field` `'text'`.
 *
 * @example
 * ```ts
 * app.get('/', batchRoute({ batcher: model.generate, input: (req) => parseTextQuery(req.query.text, model.validate) }));
 * ```
 */
export function parseTextQuery(text: unknown, validate: (body: unknown) => TextGenerationInput): TextGenerationInput {
  if (typeof text !== 'string') {
    const got = text === undefined ? 'none' : Array.isArray(text) ? `${text.length} values` : 'a nested object';
    throw new BatchError(ErrorCode.INVALID_INPUT, `Query parameter \`text\` must be given once, got ${got}`, {
      details: { field: 'text' },
    });
  }
  try {
    // Checked as sent, so the limits read as the client knows them; the worker re-checks the tokens anyway.
    const input = validate({ prompt: text, ...TEXT_QUERY_DEFAULTS });
    return { ...input, prompt: promptOf(input.prompt) };
  } catch (error) {
    // The validator speaks of the body field `prompt`; this route's field is `text`.
    if (isBatchError(error) && error.details?.field === 'prompt') {
      throw new BatchError(error.code, error.message.replaceAll('`prompt`', '`text`'), {
        cause: error,
        details: { ...error.details, field: 'text' },
      });
    }
    throw error;
  }
}

/**
 * The tutorial's answer: the prompt followed by its completion, like a Hugging Face pipeline's `generated_text`.
 *
 * @example
 * ```ts
 * textQueryAnswer('Once upon a time,', { text: 'there was a cat.' }); // 'Once upon a time, there was a cat.'
 * ```
 */
export function textQueryAnswer(text: unknown, output: { readonly text: string }): string {
  return `${promptOf(String(text))}${output.text}`;
}

// The bundled model's tokens carry their trailing space (`time,▁`): a prompt that ends mid-word is continued as part
// of that word (`time,an`), so the tutorial's route, which shows the prompt with its completion, ends it with one.
// The OpenAI endpoint sends prompts unchanged, as OpenAI does.
function promptOf(text: string): string {
  return /\s$/.test(text) ? text : `${text} `;
}
