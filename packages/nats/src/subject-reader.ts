// Reads the messages of a JetStream stream under one subject filter, in stream order, from a sequence on, a page
// at a time: what the Batch API's store uses to read a result log (its KV keys' messages, in the order they were
// written) and an object's chunks. A pull consumer asks for the next page only when the reader wants it, so a slow
// reader never makes the client hold more than one page (unlike a push consumer, which sends everything).
import type { JetStreamClient, JetStreamManager, JsMsg, MsgRequest } from '@nats-io/jetstream';

/** Messages asked for at a time (and so held at most). */
const PAGE = 256;

/**
 * The messages of `stream` under `filter` from sequence `from` on, up to the last one there when each page is
 * asked for. Ends when none is left; an empty filter ends at once (no consumer is made for it).
 *
 * @example
 * ```ts
 * for await (const message of readSubject(js, manager, 'KV_microbatch_batch_results', '$KV.microbatch_batch_results.batch_abc.>')) use(message);
 * ```
 */
export async function* readSubject(
  js: JetStreamClient,
  manager: JetStreamManager,
  stream: string,
  filter: string,
  from = 1,
): AsyncGenerator<JsMsg> {
  // Is there any message? (A consumer over nothing would wait for its first message until it expired.) The
  // client's type has no `next_by_subj` for this request; the server (2.9 and later) takes it.
  const first = await manager.streams.getMessage(stream, { seq: from, next_by_subj: filter } as MsgRequest);
  if (first === null) return;
  const consumer = await js.consumers.get(stream, { filter_subjects: filter, opt_start_seq: first.seq });
  try {
    const messages = await consumer.consume({ max_messages: PAGE });
    try {
      for await (const message of messages) {
        yield message;
        if (message.info.pending === 0) return;
      }
    } finally {
      messages.stop();
    }
  } finally {
    await consumer.delete().catch(() => undefined);
  }
}
