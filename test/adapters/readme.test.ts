import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { closeServer } from '@microbatch/test-kit';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ExampleModule, readmeCodeBlock, writeExampleModule } from '../helpers/adapter-http.js';

describe.each(['express', 'koa', 'fastify', 'hono'])('packages/%s/README.md example', (framework) => {
  const readme = fileURLToPath(new URL(`../../packages/${framework}/README.md`, import.meta.url));
  let server: Server;
  let url: string;
  let example: ExampleModule;

  beforeAll(async () => {
    // Fastify's example awaits at the top level (the plugin before the routes), which an ES module allows.
    const extension = framework === 'fastify' ? 'mts' : 'ts';
    example = await writeExampleModule(await readmeCodeBlock(readme), `${framework}-readme-example.${extension}`);
    process.env.PORT = '0';
    try {
      ({ server } = await example.load<{ server: Server }>());
    } finally {
      delete process.env.PORT;
    }
    if (!server.listening) await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await closeServer(server);
    await example.cleanup();
  });

  it("type-checks under the repository's strict compiler options", async () => {
    expect(await example.typecheck()).toBe('');
  });

  it('answers 9 concurrent requests, each with its own result, in batches of at most 4', async () => {
    const responses = await Promise.all(
      Array.from({ length: 9 }, (_, number) => request(url).post('/adder').send({ number })),
    );

    expect(responses.map((response) => [response.status, response.body])).toEqual(
      Array.from({ length: 9 }, (_, number) => [200, number + 1]),
    );
    const sizes = new Map(
      responses.map((response) => [response.headers['x-batch-id'], Number(response.headers['x-batch-size'])]),
    );
    expect([...sizes.values()].reduce((sum, size) => sum + size, 0)).toBe(9);
    expect(Math.max(...sizes.values())).toBeLessThanOrEqual(4);
  });

  it('answers invalid input and malformed JSON with JSON 400s', async () => {
    const missing = await request(url).post('/adder').send({ numbr: 1 });
    const malformed = await request(url).post('/adder').set('Content-Type', 'application/json').send('{"number":');

    expect([missing.status, missing.body]).toEqual([
      400,
      { error: { code: 'INVALID_INPUT', message: '`number` must be an integer' } },
    ]);
    expect([malformed.status, malformed.body]).toEqual([
      400,
      { error: { code: 'INVALID_INPUT', message: 'The request body is not valid JSON' } },
    ]);
  });
});
