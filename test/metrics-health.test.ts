import { createBatcher } from '@microbatch/core';
import { describe, expect, it } from 'vitest';
import { createHealth } from '@microbatch/prometheus';
import { deferred } from '@microbatch/test-kit';

const OK = { status: 200, body: { status: 'ok' } };
const unavailable = (...reasons: string[]) => ({ status: 503, body: { status: 'unavailable', reasons } });

describe('createHealth', () => {
  it('answers liveness 200 whatever the model and batchers do', async () => {
    const batcher = createBatcher(async (xs: number[]) => xs, { name: 'adder' });
    const health = createHealth({ batchers: [batcher], ready: () => false });
    expect(health.liveness()).toEqual(OK);
    await batcher.close();
    expect(health.liveness()).toEqual(OK);
  });

  it('answers readiness 503 while the model loads, 200 once it is ready, and 503 again after close()', async () => {
    const batcher = createBatcher(async (xs: number[]) => xs, { name: 'adder' });
    let loaded = false;
    const { readiness } = createHealth({ batchers: [batcher], ready: () => loaded }); // unbound on purpose
    expect(await readiness()).toEqual(unavailable('model is not ready'));
    loaded = true;
    expect(await readiness()).toEqual(OK);
    const closing = batcher.close();
    // Unready as soon as close() is called, while queued work may still drain, so traffic moves elsewhere first.
    expect(await readiness()).toEqual(unavailable('batcher "adder" is closed'));
    await closing;
    expect(await readiness()).toEqual(unavailable('batcher "adder" is closed'));
  });

  it('treats a ready() promise that has not settled within readyTimeoutMs as not ready', async () => {
    const load = deferred<boolean>();
    const health = createHealth({ ready: () => load.promise, readyTimeoutMs: 20 });
    expect(await health.readiness()).toEqual(unavailable('model readiness check timed out after 20 ms'));
    load.resolve(true);
    expect(await health.readiness()).toEqual(OK);
  });

  it('treats a rejecting or throwing ready() as not ready, without exposing its message', async () => {
    const rejecting = createHealth({ ready: () => Promise.reject(new Error('ENOENT /srv/secret/model.onnx')) });
    expect(await rejecting.readiness()).toEqual(unavailable('model readiness check failed'));
    const throwing = createHealth({
      ready: () => {
        throw new Error('ENOENT /srv/secret/model.onnx');
      },
    });
    expect(await throwing.readiness()).toEqual(unavailable('model readiness check failed'));
  });

  it('takes only `true` as ready: a check that resolves to something else has not said so', async () => {
    const health = createHealth({ ready: async () => undefined as unknown as boolean });
    expect(await health.readiness()).toEqual(unavailable('model is not ready'));
  });

  it('lists every reason at once', async () => {
    const adder = createBatcher(async (xs: number[]) => xs, { name: 'adder' });
    const doubler = createBatcher(async (xs: number[]) => xs, { name: 'doubler' });
    const health = createHealth({ batchers: [adder, doubler], ready: async () => false });
    await Promise.all([adder.close(), doubler.close()]);
    expect(await health.readiness()).toEqual(
      unavailable('model is not ready', 'batcher "adder" is closed', 'batcher "doubler" is closed'),
    );
  });

  it('is ready with no options: nothing to wait for', async () => {
    expect(await createHealth().readiness()).toEqual(OK);
  });

  it.each([
    [{ batchers: {} }, 'Expected `batchers` to be an array of batchers, got `[object Object]` (object)'],
    [{ batchers: [null] }, 'Expected `batchers[0]` to be a batcher from `createBatcher`, got `null` (null)'],
    [{ ready: true }, 'Expected `ready` to be a function, got `true` (boolean)'],
    [{ readyTimeoutMs: 0 }, 'Expected `readyTimeoutMs` to be a finite number > 0, got `0` (number)'],
    [
      { readyTimeoutMs: Number.POSITIVE_INFINITY },
      'Expected `readyTimeoutMs` to be a finite number > 0, got `Infinity` (number)',
    ],
  ])('throws a TypeError for %o', (options, message) => {
    expect(() => createHealth(options as never)).toThrow(new TypeError(message));
  });
});
