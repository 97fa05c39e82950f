// `microbatch worker --config` and `microbatch serve --queue --config` over a throwaway Redis and NATS: one worker process
// serves two models, each from the queue named after it; a web replica routes each request by its `model` to that
// queue, and the answer comes from that model.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ChildHandle,
  type ServerProcess,
  startNatsServer,
  startProcess,
  startRedisServer,
  startServerProcess,
  waitFor,
} from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as run } from './helpers/encoder-fixtures.js';
import { BIN, READY, STORIES } from './helpers/serve-config.js';

/** One answer of the `redis-cli` that comes with `redis-server`. */
function redisCli(port: number, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-p', String(port), ...args], (error, stdout) => (error ? reject(error) : resolve(stdout)));
  });
}

interface Broker {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

const BROKERS: Readonly<Record<string, () => Promise<Broker>>> = { redis: startRedisServer, nats: startNatsServer };

describe.each(Object.keys(BROKERS))('a fleet of several models over %s', (brokerName) => {
  let scratch: string;
  let config: string;
  let broker: Broker;
  let worker: ChildHandle;
  let replica: ServerProcess;
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'microbatch-fleet-'));
    config = join(scratch, 'models.yaml');
    await writeFile(
      config,
      [
        'models:',
        `  - { name: story-a, path: ${STORIES}, task: text-generation }`,
        `  - { name: story-b, path: ${STORIES}, task: text-generation, scheduling: request }`,
        '',
      ].join('\n'),
    );
    broker = await (BROKERS[brokerName] as () => Promise<Broker>)();
    worker = startProcess({
      args: [BIN, 'worker', '--queue', broker.url, '--config', config, '--log-format', 'json'],
      env: { ...process.env },
    });
    await worker.waitForOutput(/"model":"story-a","msg":"worker ready"/, 90_000);
    await worker.waitForOutput(/"model":"story-b","msg":"worker ready"/, 90_000);
    replica = await startServerProcess({
      args: [BIN, 'serve', '--queue', broker.url, '--config', config, '--port', '0', '--log-format', 'json'],
      env: { ...process.env },
      ready: READY,
    });
  }, 180_000);
  afterAll(async () => {
    await Promise.all([replica?.stop(), worker?.stop()]);
    await broker?.stop();
    await rm(scratch, { recursive: true, force: true });
  });

  it('routes each request to its model through its own queue', async () => {
    // Ready once both queues are open and each has heard its worker (the first heartbeat may still be on its way).
    let readyz = 0;
    const poll = setInterval(() => {
      void fetch(`${replica.url}/readyz`).then((response) => {
        readyz = response.status;
      });
    }, 50);
    try {
      await waitFor('the replica ready', () => readyz === 200);
    } finally {
      clearInterval(poll);
    }
    const openai = new OpenAI({ baseURL: `${replica.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const [a, b] = await Promise.all([
      openai.completions.create({ model: 'story-a', prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }),
      openai.completions.create({ model: 'story-b', prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }),
    ]);
    expect([a.model, b.model]).toEqual(['story-a', 'story-b']);
    // One folder under two names, greedy: the same text from either queue.
    expect(a.choices[0]?.text).toBe(b.choices[0]?.text);
    expect(a.usage?.completion_tokens).toBe(4);
    const unknown = await openai.completions.create({ model: 'story-c', prompt: 'x', max_tokens: 1 }).catch((e) => e);
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found' });
    // Each request was a batch of its own model's queue worker (each queue has a worker id of its own).
    const lines = worker.jsonLines() as { msg?: string; worker?: string; model?: string }[];
    const ready = lines.filter((line) => line.msg === 'worker ready');
    const modelOf = new Map(ready.map((line) => [line.worker, line.model]));
    const batches = lines.filter((line) => line.msg === 'batch').map((line) => modelOf.get(line.worker));
    expect(batches.toSorted((x, y) => String(x).localeCompare(String(y)))).toEqual(['story-a', 'story-b']);
    if (brokerName !== 'redis') return;
    // On Redis, each request's entry went to its model's own stream.
    for (const model of ['story-a', 'story-b']) {
      const info = await redisCli(broker.port, ['XINFO', 'STREAM', `microbatch:${model}:requests`]);
      const added = Number(/entries-added\n(\d+)/.exec(info)?.[1]);
      expect([model, added]).toEqual([model, 1]);
    }
  }, 60_000);

  it('refuses a flag with no effect on a web replica or beside a config, and a model its task cannot read', async () => {
    const replicaLoads = await run(['serve', '--queue', broker.url, '--config', config, '--max-loaded-models', '1']);
    expect(replicaLoads.stderr).toContain(
      'error: --max-loaded-models does not apply with --queue (a web replica loads no model)',
    );
    const workerFlag = await run(['worker', '--queue', broker.url, '--config', config, '--workers', '2']);
    expect(workerFlag.stderr).toContain('error: --workers does not apply with --config: set it per model in the file');
    // Encoders are served over a queue too (encoder-queue.test.ts); a decoder's folder is no cross-encoder.
    const embedder = join(scratch, 'reranker.yaml');
    await writeFile(embedder, `models:\n  - { name: e, path: ${STORIES}, task: rerank }\n`);
    const embedWorker = await run(['worker', '--queue', broker.url, '--config', embedder]);
    expect(embedWorker.stderr).toContain(`model "e": ${STORIES}/config.json has no \`id2label\``);
    for (const result of [replicaLoads, workerFlag, embedWorker]) expect(result.code).toBe(1);
    expect([worker.exitInfo(), replica.exitInfo()]).toEqual([undefined, undefined]);
  }, 60_000);
});
