import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type InProcessServer, serveInProcess, startChild, warmClient } from '../testing/child-server.js';
import { createAdder, createApp } from './src/app.js';

describe('batch adder', () => {
  const lines: string[] = [];
  const adder = createAdder({ computeMs: 20, log: (line) => lines.push(line) });
  let server: InProcessServer;
  let url: string;

  beforeAll(async () => {
    server = await serveInProcess(createApp(adder), () => adder.close());
    url = server.url;
  });
  afterAll(() => server.close());

  it("reproduces the tutorial's handle queries: a first batch of 1, then batches of 4", async () => {
    const sizes: number[] = [];
    const off = adder.on('batchStart', ({ batchSize }) => sizes.push(batchSize));
    // The other 8 are queued while the first batch runs: synchronously, as soon as it is dispatched alone.
    const rest = new Promise<Promise<number>[]>((resolve) => {
      const once = adder.on('batchStart', () => {
        once();
        resolve(Array.from({ length: 8 }, (_, i) => adder(i + 1)));
      });
    });
    const first = adder(0);
    expect(await Promise.all([first, ...(await rest)])).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    off();
    expect(sizes).toEqual([1, 4, 4]);
  });

  it('answers 9 parallel HTTP queries with N + 1, in batches of at most 4, logging one line per batch', async () => {
    lines.length = 0;
    const responses = await Promise.all(Array.from({ length: 9 }, (_, i) => fetch(`${url}/adder?number=${i}`)));
    expect(await Promise.all(responses.map((response) => response.text()))).toEqual([
      '1',
      '2',
      '3',
      '4',
      '5',
      '6',
      '7',
      '8',
      '9',
    ]);
    const sizes = responses.map((response) => Number(response.headers.get('x-batch-size')));
    expect(sizes.every((size) => size >= 1 && size <= 4)).toBe(true);
    const logged = lines.map((line) => Number(/^\[adder\] batch \d+: size (\d), queue wait/.exec(line)?.[1]));
    expect(logged.reduce((sum, size) => sum + size, 0)).toBe(9);
    expect(logged.length).toBeGreaterThanOrEqual(3);
  });

  it.each(['/adder', '/adder?number=two', '/adder?number=1.5', '/adder?number=1&number=2'])(
    'answers %s with 400 naming `number`',
    async (path) => {
      const response = await fetch(`${url}${path}`);
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({
        error: {
          code: 'INVALID_INPUT',
          message: 'Query parameter `number` must be an integer',
          details: { field: 'number' },
        },
      });
    },
  );

  it('finishes the queued and running additions on SIGTERM and exits 0', async () => {
    const cwd = fileURLToPath(new URL('.', import.meta.url));
    const server = await startChild(cwd, ['--import', 'tsx', 'src/main.ts'], { ADDER_COMPUTE_MS: '200' });
    const client = await warmClient(server.url, 9);
    const sends = Array.from({ length: 9 }, (_, i) => client.send('GET', `/adder?number=${i}`));
    // The first answer comes after one 200 ms batch; the other 8 are queued or running by then.
    void Promise.race(sends).then(() => server.child.kill('SIGTERM'));
    const answers = await Promise.all(sends);
    client.close();
    expect(answers.map((answer) => [answer.status, answer.body])).toEqual(
      Array.from({ length: 9 }, (_, i) => [200, String(i + 1)]),
    );
    expect(await server.exited).toBe(0);
    expect(server.output()).toMatch(/SIGTERM: no longer accepting[\s\S]*size 4[\s\S]*drained and closed; exiting/);
  });
});
