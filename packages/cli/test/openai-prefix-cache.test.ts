// `usage.prompt_tokens_details.cached_tokens`, as OpenAI and vLLM report it, read by the official `openai` client from
// a real `microbatch serve` process: what the decode loop's prefix cache reused for each request, the same figure
// `/metrics` counts (`microbatch_prefix_cache_tokens_total`) and the decode-loop log line sums; absent without a cache.
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import { type ServerProcess, samplesOf, startServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const MODEL = bundledModelDir();
/** Each well over two 16-token blocks of the bundled model's tokenizer; each test shares a prefix of its own. */
const LILY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her dog. ';
const TOM =
  'One day, a boy named Tom found a big red box under his bed. He opened it and saw a shiny toy car inside it. ';
const BEN =
  'There was a small bird called Ben who lived in a tall tree by the river. Every morning he sang a happy song. ';

function serve(prefixCacheMb: number): Promise<ServerProcess> {
  const args = [BIN, 'serve', '--model', MODEL, '--port', '0', '--log-format', 'json', '--workers', '1'];
  args.push('--prefix-cache-mb', String(prefixCacheMb));
  return startServerProcess({ args, env: { ...process.env }, ready: READY });
}

function client(server: ServerProcess): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}

/** `microbatch_prefix_cache_tokens_total` now (0 before the loop has reported anything). */
async function cachedTotal(server: ServerProcess): Promise<number> {
  const [sample] = samplesOf(
    await (await fetch(`${server.url}/metrics`)).text(),
    'microbatch_prefix_cache_tokens_total',
  );
  return sample === undefined ? 0 : Number(sample.split(' ').at(-1));
}

/** Runs `request` and returns what it reported as cached and how much the metric grew meanwhile. */
async function measured(
  server: ServerProcess,
  request: () => Promise<OpenAI.CompletionUsage | undefined | null>,
): Promise<{ usage: OpenAI.CompletionUsage | undefined | null; grew: number }> {
  const before = await cachedTotal(server);
  const usage = await request();
  // The loop reports the step a sequence ends in before it answers: the metric already holds this request's reuse.
  return { usage, grew: (await cachedTotal(server)) - before };
}

async function lastUsage<T extends { usage?: OpenAI.CompletionUsage | null }>(
  stream: AsyncIterable<T>,
): Promise<OpenAI.CompletionUsage | null | undefined> {
  let last: T | undefined;
  for await (const chunk of stream) last = chunk;
  return last?.usage;
}

describe('openai client: prompt_tokens_details.cached_tokens with the prefix cache on (64 MiB)', () => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    server = await serve(64);
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  it('completions: 0 for the first of two prompts sharing a prefix, what the metric grew by for the second', async () => {
    const complete = (prompt: string) => async () =>
      (await openai.completions.create({ model: 'm', prompt, max_tokens: 3, temperature: 0 })).usage;
    const first = await measured(server, complete(`${LILY}${TOM}The end.`));
    expect(first.usage?.prompt_tokens).toBeGreaterThanOrEqual(32);
    expect(first.usage?.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    expect(first.grew).toBe(0);
    const second = await measured(server, complete(`${LILY}${TOM}Then they played all day.`));
    const cached = second.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    // Whole 16-token blocks of the shared ~50 tokens, at least two.
    expect(cached).toBeGreaterThanOrEqual(32);
    expect(cached % 16).toBe(0);
    expect(cached).toBeLessThan(second.usage?.prompt_tokens ?? 0);
    expect(cached).toBe(second.grew);
  });

  it('completions, streamed with include_usage: the usage chunk carries the figure; prompts of one request add up', async () => {
    const stream = (prompt: string[]) => async () =>
      lastUsage(
        await openai.completions.create({
          model: 'm',
          prompt,
          max_tokens: 3,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        }),
      );
    const first = await measured(server, stream([`${TOM}${BEN}Goodbye.`]));
    expect(first.usage?.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    expect(first.grew).toBe(0);
    // Two prompts in one request, both starting with the cached prefix: their reuse adds up, as their prompt tokens do.
    const second = await measured(server, stream([`${TOM}${BEN}Hello there.`, `${TOM}${BEN}The sun was up.`]));
    const cached = second.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(cached).toBeGreaterThanOrEqual(2 * 32);
    expect(cached).toBe(second.grew);
  });

  it('chat, whole and streamed: the conversation after a cached system prompt reuses it', async () => {
    const messages = (question: string): OpenAI.Chat.ChatCompletionMessageParam[] => [
      { role: 'system', content: `${BEN}${LILY}` },
      { role: 'user', content: question },
    ];
    const whole = await measured(
      server,
      async () =>
        (
          await openai.chat.completions.create({
            model: 'm',
            messages: messages('Who is Ben?'),
            max_tokens: 3,
            temperature: 0,
          })
        ).usage,
    );
    expect(whole.usage?.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    expect(whole.grew).toBe(0);
    const streamed = await measured(server, async () =>
      lastUsage(
        await openai.chat.completions.create({
          model: 'm',
          messages: messages('Where does Lily play?'),
          max_tokens: 3,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        }),
      ),
    );
    const cached = streamed.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(cached).toBeGreaterThanOrEqual(32);
    expect(cached).toBe(streamed.grew);
    // n: 2 shares one prompt, counted once: so is its reuse (the most a choice reused), never over prompt_tokens,
    // while /metrics counts both sequences' reuse.
    const two = await measured(
      server,
      async () =>
        (
          await openai.chat.completions.create({
            model: 'm',
            messages: messages('Where does Lily play?'),
            max_tokens: 3,
            temperature: 0,
            n: 2,
          })
        ).usage,
    );
    const shared = two.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(shared).toBeGreaterThanOrEqual(32);
    expect(shared).toBeLessThan(two.usage?.prompt_tokens ?? 0);
    expect(two.grew).toBeGreaterThanOrEqual(shared);
    expect(two.grew).toBeLessThanOrEqual(2 * shared);
  });

  it('the decode-loop log lines sum the reused tokens /metrics counts', async () => {
    const total = await cachedTotal(server);
    expect(total).toBeGreaterThan(0);
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    const loop = (server.jsonLines() as Array<Record<string, unknown>>).filter((line) => line.msg === 'decode loop');
    const withCache = loop.filter((line) => line.prefixCacheLookups !== undefined);
    expect(withCache.length).toBeGreaterThan(0);
    expect(withCache.reduce((sum, line) => sum + Number(line.prefixCacheTokens), 0)).toBe(total);
    expect(withCache.reduce((sum, line) => sum + Number(line.prefixCacheHits), 0)).toBeGreaterThanOrEqual(4);
  });
});

describe('openai client: no prompt_tokens_details with --prefix-cache-mb 0', () => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    server = await serve(0);
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  it('leaves the field out of whole and streamed usage, completions and chat, even for a repeated prompt', async () => {
    const prompt = `${LILY}${TOM}`;
    for (let round = 0; round < 2; round += 1) {
      const whole = await openai.completions.create({ model: 'm', prompt, max_tokens: 2, temperature: 0 });
      expect(whole.usage?.prompt_tokens).toBeGreaterThanOrEqual(32);
      expect(whole.usage).not.toHaveProperty('prompt_tokens_details');
      const streamed = await lastUsage(
        await openai.completions.create({
          model: 'm',
          prompt,
          max_tokens: 2,
          stream: true,
          stream_options: { include_usage: true },
        }),
      );
      expect(streamed?.total_tokens).toBeGreaterThanOrEqual(32);
      expect(streamed).not.toHaveProperty('prompt_tokens_details');
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: prompt }];
      const chat = await openai.chat.completions.create({ model: 'm', messages, max_tokens: 2, n: 2 });
      expect(chat.usage?.prompt_tokens).toBeGreaterThanOrEqual(32);
      expect(chat.usage).not.toHaveProperty('prompt_tokens_details');
      const chatStreamed = await lastUsage(
        await openai.chat.completions.create({
          model: 'm',
          messages,
          max_tokens: 2,
          stream: true,
          stream_options: { include_usage: true },
        }),
      );
      expect(chatStreamed?.total_tokens).toBeGreaterThanOrEqual(32);
      expect(chatStreamed).not.toHaveProperty('prompt_tokens_details');
    }
    expect(await cachedTotal(server)).toBe(0);
  });
});
