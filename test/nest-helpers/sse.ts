import { type EventSourceMessage, createParser } from 'eventsource-parser';

/** The events of a complete Server-Sent Events body, parsed as a client would. */
export function parseSse(text: string): EventSourceMessage[] {
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => events.push(event) });
  parser.feed(text);
  return events;
}
