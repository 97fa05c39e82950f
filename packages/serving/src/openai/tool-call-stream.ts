// Streaming a forced tool call as it is generated. With `tool_choice` "required" or a named function, the grammar
// makes the model write exactly `[{"name": "<name>", "arguments": {...}}, ...]` (XGrammar's separators `, ` and `: `,
// properties in the schema's order), so the text can be read as it comes: a call's first piece (index, id, type,
// name) goes out once its name is complete, then its arguments in the fragments the model writes them, as OpenAI
// streams `delta.tool_calls`.
import { toolCallId } from './tool-calls.js';
import type { ToolCallDelta } from './chat-response.js';

type State = 'outside' | 'name' | 'afterName' | 'arguments';

/**
 * Reads a forced answer's text piece by piece into `delta.tool_calls` pieces.
 *
 * @example
 * ```ts
 * const calls = new ToolCallStream();
 * calls.push('[{"name": "weather", "argu'); // [] (the name's piece goes out with the arguments' start)
 * calls.push('ments": {"city": "Oslo"}}]'); // [{ index: 0, id, type, function: { name, arguments: '' } }, { index: 0, function: { arguments: '{"city": "Oslo"}' } }]
 * ```
 */
export class ToolCallStream {
  #state: State = 'outside';
  /** What was read since the last landmark (`"name": "`, `"arguments": `). */
  #pending = '';
  #name = '';
  #index = -1;
  #depth = 0;
  #inString = false;
  #escaped = false;

  /** How many calls have begun. */
  get calls(): number {
    return this.#index + 1;
  }

  /** The pieces the new text completes. */
  push(text: string): ToolCallDelta[] {
    const pieces: ToolCallDelta[] = [];
    let fragment = '';
    const flush = () => {
      if (fragment !== '') pieces.push({ index: this.#index, function: { arguments: fragment } });
      fragment = '';
    };
    for (const char of text) {
      switch (this.#state) {
        case 'outside':
          this.#pending += char;
          if (this.#pending.endsWith('"name": "')) {
            this.#state = 'name';
            this.#name = '';
            this.#escaped = false;
          }
          break;
        case 'name':
          if (!this.#escaped && char === '"') {
            this.#state = 'afterName';
            this.#pending = '';
          } else {
            this.#escaped = !this.#escaped && char === '\\';
            this.#name += char;
          }
          break;
        case 'afterName':
          this.#pending += char;
          if (this.#pending.endsWith('"arguments": ')) {
            this.#state = 'arguments';
            this.#index += 1;
            this.#depth = 0;
            this.#inString = false;
            this.#escaped = false;
            pieces.push({
              index: this.#index,
              id: toolCallId(),
              type: 'function',
              function: { name: JSON.parse(`"${this.#name}"`) as string, arguments: '' },
            });
          }
          break;
        case 'arguments':
          fragment += char;
          if (this.#inString) {
            if (this.#escaped) this.#escaped = false;
            else if (char === '\\') this.#escaped = true;
            else if (char === '"') this.#inString = false;
          } else if (char === '"') this.#inString = true;
          else if (char === '{' || char === '[') this.#depth += 1;
          else if (char === '}' || char === ']') this.#depth -= 1;
          if (this.#depth === 0 && !this.#inString) {
            flush();
            this.#state = 'outside';
            this.#pending = '';
          }
          break;
      }
    }
    flush();
    return pieces;
  }
}
