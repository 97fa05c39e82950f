import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBatcher } from '@microbatch/core';
import { deferred } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';
import { logBatches, shutdownServer } from '../src/index.js';

function get(port: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/' }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('shutdownServer', () => {
  it('refuses new work at once, lets the running request finish, stops listening, then closes; once', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const started = deferred();
    const batcher = createBatcher(async (inputs: number[]) => {
      started.resolve();
      await held;
      return inputs.map((n) => n + 1);
    });
    const server = createServer((_req, res) => {
      void batcher(1).then(
        (value) => res.end(String(value)),
        (error: { code?: string }) => res.end(String(error.code)),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const steps: string[] = [];
    const shutdown = shutdownServer(server, {
      drain: async () => {
        await batcher.close();
        steps.push('drained');
      },
      close: async () => {
        steps.push('closed');
      },
    });

    const inFlight = get(port);
    await started.promise;
    const stopped = shutdown();
    expect(shutdown()).toBe(stopped);
    // While it drains, the listener stays open (closing it would reset connections in its backlog): a new request
    // is answered, refused, with `Connection: close`.
    expect(await get(port)).toEqual({ status: 200, body: 'CLOSED' });
    await expect(batcher(2)).rejects.toMatchObject({ code: 'CLOSED' });
    expect(steps).toEqual([]);
    release();
    expect(await inFlight).toEqual({ status: 200, body: '2' });
    await stopped;
    await expect(get(port)).rejects.toThrow(/ECONNREFUSED/);
    expect(steps).toEqual(['drained', 'closed']);
    expect(server.listening).toBe(false);
  });

  it('throws a TypeError without a drain step', () => {
    expect(() => shutdownServer(createServer(), {} as never)).toThrow(
      new TypeError('Expected `steps.drain` to be a function, got `undefined` (undefined)'),
    );
  });
});

describe('logBatches', () => {
  it('logs one line per batch with its size, queue wait and execution time, until stopped', async () => {
    const lines: string[] = [];
    const batcher = createBatcher(async (inputs: string[]) => inputs, { name: 'echo', batchWaitTimeoutMs: 1 });
    const stop = logBatches(batcher, (line) => lines.push(line));
    await Promise.all([batcher('a'), batcher('b')]);
    stop();
    await batcher('c');
    expect(lines).toEqual([
      expect.stringMatching(
        /^\[echo\] batch 1: size 2, queue wait \d+\.\d ms \(max \d+\.\d ms\), execution \d+\.\d ms$/,
      ),
    ]);
  });
});
