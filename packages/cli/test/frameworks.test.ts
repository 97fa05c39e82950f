// `microbatch serve --framework fastify|hono`: the installed bin serves the bundled model through the Fastify and
// Hono apps of @microbatch/serving, as it does through Express, Koa and Nest, and drains on SIGTERM.
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import { startServerProcess } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
/** The CLI's ready line, as pino writes it off a terminal. */
const READY = /"url":"(http:[^"]+)","msg":"ready"/;

describe.each(['fastify', 'hono'])('microbatch serve --framework %s', (framework) => {
  it('serves the tutorial GET, OpenAI completions (JSON and SSE) and models, then exits 0 on SIGTERM', async () => {
    const args = [BIN, 'serve', '--model', bundledModelDir(), '--framework', framework, '--port', '0'];
    const server = await startServerProcess({ args, env: { ...process.env, PORT: '0' }, ready: READY });
    try {
      const story = await fetch(`${server.url}/?text=Once+upon+a+time`);
      expect([story.status, story.headers.get('x-batch-size')]).toEqual([200, '1']);
      expect(await story.text()).toMatch(/^Once upon a time \S/);

      const post = (body: unknown) =>
        fetch(`${server.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const completion = await post({ prompt: 'The cat ', max_tokens: 4 });
      expect(((await completion.json()) as { object: string }).object).toBe('text_completion');
      const streamed = await post({ prompt: 'The cat ', max_tokens: 4, stream: true });
      expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(await streamed.text()).toMatch(/data: \[DONE\]\n\n$/);
      const invalid = await post({ prompt: 42 });
      expect([invalid.status, ((await invalid.json()) as { error: { code: string } }).error.code]).toEqual([
        400,
        'INVALID_INPUT',
      ]);

      const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((model) => model.id)).toEqual(['tinystories-656k']);
    } finally {
      server.child.kill('SIGTERM');
    }
    expect((await server.exited).code).toBe(0);
    const lines = server.jsonLines() as Array<Record<string, unknown>>;
    expect(lines.find((line) => line.msg === 'microbatch serve')).toMatchObject({ framework });
    expect(lines.at(-1)).toMatchObject({ msg: 'drained and closed; exiting' });
  });
});
