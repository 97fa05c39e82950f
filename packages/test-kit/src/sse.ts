import { createParser } from 'eventsource-parser';

/** One parsed Server-Sent Event. */
export interface SseMessage {
  readonly event: string | undefined;
  readonly data: string;
  readonly id?: string | undefined;
}

/**
 * Reads a `fetch` response as Server-Sent Events (parsed by `eventsource-parser`, as a browser would) until it ends;
 * `onMessage` sees each event as it arrives, and returning `false` stops reading (the caller then aborts).
 *
 * @example
 * ```ts
 * const messages = await readSse(await fetch(url, { method: 'POST', body }));
 * expect(sseValues(messages)).toEqual({ values: ['a#0', 'a#1'], done: true });
 * ```
 */
export async function readSse(
  response: Response,
  onMessage: (message: SseMessage, index: number) => boolean | void | Promise<boolean | void> = () => undefined,
): Promise<SseMessage[]> {
  const messages: SseMessage[] = [];
  const parser = createParser({ onEvent: (event) => messages.push({ event: event.event, data: event.data }) });
  const body = response.body;
  if (body === null) throw new Error('The response has no body');
  const decoder = new TextDecoder();
  let seen = 0;
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (seen < messages.length) {
      const keepReading = await onMessage(messages[seen] as SseMessage, seen);
      seen += 1;
      if (keepReading === false) return messages;
    }
  }
  return messages;
}

/**
 * The events of a complete Server-Sent Events body (a string already read), parsed as a client would.
 *
 * @example
 * ```ts
 * parseSse('data: "a"\n\ndata: [DONE]\n\n'); // [{ event: undefined, data: '"a"', id: undefined }, ...]
 * ```
 */
export function parseSse(text: string): SseMessage[] {
  const messages: SseMessage[] = [];
  const parser = createParser({
    onEvent: (event) => messages.push({ event: event.event, data: event.data, id: event.id }),
  });
  parser.feed(text);
  return messages;
}

/**
 * The values of `data:` events, JSON-decoded, and whether the stream ended with `[DONE]`.
 *
 * @example
 * ```ts
 * sseValues(parseSse('data: 1\n\ndata: [DONE]\n\n')); // { values: [1], done: true }
 * ```
 */
export function sseValues(messages: readonly SseMessage[]): { values: unknown[]; done: boolean } {
  const last = messages.at(-1);
  const done = last?.event === undefined && last?.data === '[DONE]';
  const payload = done ? messages.slice(0, -1) : messages;
  return { values: payload.map((message) => JSON.parse(message.data) as unknown), done };
}
