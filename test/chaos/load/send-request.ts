// One OpenAI completion request to a replica, whole or streamed, read to its end or until its deadline: what came
// back, recorded as an `Exchange` without judging it (checks/outcome.ts judges).
import { type SseMessage, readSse } from '@microbatch/test-kit';
import type { Exchange, ExchangeEnd } from '../checks/outcome.js';

/** One completion request. */
export interface CompletionCall {
  /** The replica's base URL. */
  readonly url: string;
  readonly prompt: string;
  readonly maxTokens: number;
  readonly stream: boolean;
  /** When the client gives up, counted from the request's start: its deadline plus slack. */
  readonly giveUpMs: number;
}

interface ChunkBody {
  readonly choices?: ReadonlyArray<{ readonly text?: unknown }>;
}
interface ErrorBody {
  readonly error?: { readonly code?: unknown };
}

/**
 * Sends one greedy (`temperature: 0`) completion request and reads its answer to the end; never rejects. A request
 * still open `giveUpMs` after it started is aborted and recorded as `deadline`.
 *
 * @example
 * ```ts
 * const exchange = await sendCompletion({ url, prompt: 'Once upon a time', maxTokens: 32, stream: true, giveUpMs: 45_000 });
 * ```
 */
export async function sendCompletion(call: CompletionCall): Promise<Exchange> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), call.giveUpMs);
  let status: number | undefined;
  try {
    const response = await fetch(`${call.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: call.prompt, max_tokens: call.maxTokens, temperature: 0, stream: call.stream }),
      signal: controller.signal,
    });
    status = response.status;
    const isStream = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
    if (status === 200 && isStream) return await readStream(response, call.stream);
    return await readWhole(response, call.stream);
  } catch (error) {
    const end: ExchangeEnd = controller.signal.aborted ? 'deadline' : 'reset';
    return {
      status,
      streamed: call.stream,
      end,
      text: '',
      errorCode: undefined,
      eventsAfterEnd: 0,
      detail: describe(error),
    };
  } finally {
    clearTimeout(timer);
  }
}

async function readWhole(response: Response, streamed: boolean): Promise<Exchange> {
  const body = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = undefined;
  }
  const text = (parsed as ChunkBody | undefined)?.choices?.[0]?.text;
  const code = (parsed as ErrorBody | undefined)?.error?.code;
  return {
    status: response.status,
    streamed,
    end: 'body',
    text: typeof text === 'string' ? text : '',
    errorCode: typeof code === 'string' ? code : undefined,
    eventsAfterEnd: 0,
    detail: response.status === 200 ? undefined : `${response.status} ${body.slice(0, 200)}`,
  };
}

async function readStream(response: Response, streamed: boolean): Promise<Exchange> {
  let text = '';
  let end: ExchangeEnd = 'eof';
  let errorCode: string | undefined;
  let eventsAfterEnd = 0;
  let detail: string | undefined;
  await readSse(response, (message: SseMessage) => {
    if (end !== 'eof') {
      eventsAfterEnd += 1;
      detail ??= `after ${end}: ${message.data.slice(0, 200)}`;
      return;
    }
    if (message.event === 'error') {
      end = 'error-event';
      const code = (JSON.parse(message.data) as ErrorBody).error?.code;
      errorCode = typeof code === 'string' ? code : undefined;
      detail = message.data.slice(0, 200);
    } else if (message.data === '[DONE]') {
      end = 'done';
    } else {
      const piece = (JSON.parse(message.data) as ChunkBody).choices?.[0]?.text;
      if (typeof piece === 'string') text += piece;
    }
  });
  return { status: response.status, streamed, end, text, errorCode, eventsAfterEnd, detail };
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? `${error.message}: ${cause.message}` : error.message;
}
