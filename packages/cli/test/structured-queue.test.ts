// Structured outputs over `--queue`: the grammar travels in the queued request and is compiled and enforced on the
// worker process (the replica has no model); a grammar the worker's vocabulary cannot start is still a 400.
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import {
  type ChildHandle,
  type ServerProcess,
  type TestRedis,
  startProcess,
  startRedisServer,
  startServerProcess,
} from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;

describe('structured outputs through microbatch serve --queue and microbatch worker (Redis)', () => {
  let redis: TestRedis;
  let replica: ServerProcess;
  let worker: ChildHandle;

  beforeAll(async () => {
    redis = await startRedisServer();
    replica = await startServerProcess({
      args: [BIN, 'serve', '--queue', redis.url, '--model', 'tinystories-656k', '--port', '0'],
      ready: READY,
    });
    worker = startProcess({ args: [BIN, 'worker', '--queue', redis.url, '--model', bundledModelDir()] });
    await worker.waitForOutput(/"msg":"worker ready"/, 90_000);
    for (let attempt = 0; attempt < 3_000; attempt += 1) {
      const ready = await fetch(`${replica.url}/readyz`).then(
        (response) => response.status,
        () => 0,
      );
      if (ready === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }, 120_000);
  afterAll(async () => {
    await Promise.all([replica?.stop(), worker?.stop()]);
    await redis?.stop();
  });

  it('enforces the grammar on the worker, and answers 400 for one its vocabulary cannot start', async () => {
    const post = (body: Record<string, unknown>) =>
      fetch(`${replica.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'How is Lily?' }], max_tokens: 16, ...body }),
      });
    for (let round = 0; round < 3; round += 1) {
      const response = await post({ temperature: 1, structured_outputs: { choice: ['happy', 'sad', 'very tired'] } });
      expect(response.status).toBe(200);
      const answer = (await response.json()) as { choices: { message: { content: string }; finish_reason: string }[] };
      expect(['happy', 'sad', 'very tired']).toContain(answer.choices[0]?.message.content);
      expect(answer.choices[0]?.finish_reason).toBe('stop');
    }
    const refused = await post({ response_format: { type: 'json_object' } });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
      'cannot spell this grammar',
    );
    const unsupported = await post({ structured_outputs: { json: { type: 'integer', multipleOf: 2 } } });
    expect(unsupported.status).toBe(400);
  });
});
