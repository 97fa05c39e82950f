// The soak's clients: one request of each kind (whole and streamed completions, chat, a stream the client cancels
// after its first chunk, a bad body, an embedding), each accounted for exactly: the status, whether a stream ended
// with `[DONE]` once, or the error that ended it; a capacity probe (closed loops) and the paced open loop.

import { Agent, request } from 'node:http';

/** What the soak sends. */
export type Kind = 'whole' | 'stream' | 'chat' | 'cancel' | 'bad' | 'embed';

/** One request's fate. */
export interface Outcome {
  readonly kind: Kind;
  readonly status: number;
  /** A stream's `data: [DONE]` count (1 for a complete stream); 0 otherwise. */
  readonly done: number;
  /** The error that ended it before a complete answer (not a cancel the client made). */
  readonly error?: string;
}

const BAD_BODIES = [
  '{"prompt": 42}',
  '{"prompt": "Hi", "max_tokens": -1}',
  '{"prompt": "Hi", "top_k": 5}',
  '{not json',
  '[]',
  '{"messages": "hello"}',
];
const PROMPTS = ['Once upon a time', 'The little dog', 'Lily went to the park', 'Tom had a red ball'];

/** The soak's clients' connections: kept alive, at most 64 per server (more requests wait in the client). */
const AGENT = new Agent({ keepAlive: true, maxSockets: 64 });
/** A request with no complete answer by then is a problem (`timeout`), never waited for forever. */
const TIMEOUT_MS = 60_000;

interface Reply {
  readonly status: number;
  readonly streamed: boolean;
  readonly text: string;
  /** The client ended it itself (`cancelAfterFirst`). */
  readonly cancelled: boolean;
}

/** POSTs `body` to `url`; with `cancelAfterFirst`, destroys the request at the first SSE `data:` it reads. */
function post(url: string, body: string, cancelAfterFirst = false): Promise<Reply> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        agent: AGENT,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const streamed = (res.headers['content-type'] ?? '').startsWith('text/event-stream');
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (cancelAfterFirst && streamed && text.includes('data: ')) {
            req.destroy();
            resolve({ status: res.statusCode ?? 0, streamed, text, cancelled: true });
          }
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, streamed, text, cancelled: false }));
        res.on('error', reject);
      },
    );
    req.setTimeout(TIMEOUT_MS, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** Sends one request of `kind`; never rejects. */
export async function sendOne(kind: Kind, textUrl: string, embedUrl: string, n: number): Promise<Outcome> {
  const prompt = PROMPTS[n % PROMPTS.length] as string;
  try {
    if (kind === 'embed') {
      const reply = await post(`${embedUrl}/v1/embeddings`, JSON.stringify({ input: [prompt, `${prompt}!`] }));
      return { kind, status: reply.status, done: 0 };
    }
    if (kind === 'bad') {
      const path = n % 2 === 0 ? '/v1/completions' : '/v1/chat/completions';
      const reply = await post(`${textUrl}${path}`, BAD_BODIES[n % BAD_BODIES.length] as string);
      return { kind, status: reply.status, done: 0 };
    }
    if (kind === 'whole') {
      const reply = await post(`${textUrl}/v1/completions`, JSON.stringify({ prompt, max_tokens: 16 }));
      return { kind, status: reply.status, done: 0 };
    }
    const body =
      kind === 'chat'
        ? { messages: [{ role: 'user', content: prompt }], max_tokens: 16, stream: n % 2 === 0 }
        : { prompt, max_tokens: 16, stream: true };
    const path = kind === 'chat' ? '/v1/chat/completions' : '/v1/completions';
    const reply = await post(`${textUrl}${path}`, JSON.stringify(body), kind === 'cancel');
    if (reply.cancelled || !reply.streamed) return { kind, status: reply.status, done: 0 };
    return { kind, status: reply.status, done: reply.text.split('data: [DONE]').length - 1 };
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    const detail = typeof code === 'string' ? ` (${code})` : '';
    return { kind, status: 0, done: 0, error: `${error instanceof Error ? error.message : String(error)}${detail}` };
  }
}

/** Requests per second `loops` closed loops of `kind` complete over `seconds` (answered 200). */
export async function capacity(kind: Kind, textUrl: string, embedUrl: string, loops: number, seconds: number) {
  const until = performance.now() + seconds * 1000;
  let ok = 0;
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      for (let n = loop; performance.now() < until; n += loops) {
        if ((await sendOne(kind, textUrl, embedUrl, n)).status === 200) ok += 1;
      }
    }),
  );
  return ok / seconds;
}

/** The text mix, in a fixed rotation: whole 4, stream 3, chat 2, cancel 2, bad 1 of every 12. */
const MIX: readonly Kind[] = [
  'whole',
  'stream',
  'chat',
  'whole',
  'cancel',
  'stream',
  'whole',
  'bad',
  'chat',
  'stream',
  'whole',
  'cancel',
];

/**
 * An open loop for `seconds`: text requests at `textRate` per second (the mix above) and embeddings at `embedRate`,
 * each sent on schedule whether or not the ones before it were answered; resolves with every outcome once all are
 * answered.
 */
export async function openLoop(
  textUrl: string,
  embedUrl: string,
  textRate: number,
  embedRate: number,
  seconds: number,
): Promise<Outcome[]> {
  const pending: Promise<Outcome>[] = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  const paced = async (rate: number, next: (n: number) => Kind) => {
    for (let n = 0; ; n += 1) {
      const at = start + (n * 1000) / rate;
      if (at >= end) return;
      const wait = at - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      pending.push(sendOne(next(n), textUrl, embedUrl, n));
    }
  };
  await Promise.all([paced(textRate, (n) => MIX[n % MIX.length] as Kind), paced(embedRate, () => 'embed')]);
  return Promise.all(pending);
}
