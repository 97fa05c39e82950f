// The model registry on fake services: which model is loaded when, who waits, what is refused, what is counted.
import { describe, expect, it } from 'vitest';
import { type ModelDefinition, type TextCompletionService, createModelRegistry } from '../src/index.js';

interface Fake {
  readonly created: string[];
  readonly closed: string[];
  definition(name: string, load?: 'eager' | 'lazy', fail?: boolean): ModelDefinition;
}

function fakes(): Fake {
  const created: string[] = [];
  const closed: string[] = [];
  return {
    created,
    closed,
    definition: (name, load = 'lazy', fail = false) => ({
      name,
      task: 'text-generation',
      load,
      create: () => {
        created.push(name);
        const service = {
          id: name,
          batchers: [],
          ready: fail ? Promise.reject(new Error('no such file')) : Promise.resolve(),
          isReady: () => true,
          drain: async () => undefined,
          close: async () => {
            closed.push(name);
          },
        };
        return service as unknown as TextCompletionService;
      },
    }),
  };
}

const counter = async (registry: ReturnType<typeof createModelRegistry>, metric: string, model: string) => {
  const text = await registry.metrics.metrics();
  const line = text.split('\n').find((row) => row.startsWith(`${metric}{model="${model}"}`));
  return Number(line?.split(' ')[1]);
};

describe('createModelRegistry', () => {
  it('loads eager models at once and lazy ones on their first request', async () => {
    const fake = fakes();
    const registry = createModelRegistry([fake.definition('a', 'eager'), fake.definition('b')]);
    await registry.ready;
    expect(registry.isReady()).toBe(true);
    expect(await registry.unready()).toEqual([]);
    expect(fake.created).toEqual(['a']);
    expect(registry.find('b')?.state).toBe('unloaded');
    const lease = await registry.acquire('b');
    expect(fake.created).toEqual(['a', 'b']);
    expect(registry.find('b')).toMatchObject({ state: 'loaded', inFlight: 1 });
    lease.release();
    lease.release(); // a second release counts nothing
    expect(registry.find('b')?.inFlight).toBe(0);
    await expect(registry.acquire('c')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await registry.close();
    expect(fake.closed.sort()).toEqual(['a', 'b']);
    expect(await registry.unready()).toEqual(['the server is shutting down']);
  });

  it('at maxLoadedModels, unloads the least recently used model once idle before loading another', async () => {
    const fake = fakes();
    const registry = createModelRegistry([fake.definition('a'), fake.definition('b'), fake.definition('c')], {
      maxLoadedModels: 2,
    });
    (await registry.acquire('a')).release();
    const heldB = await registry.acquire('b');
    (await registry.acquire('a')).release(); // a is now more recently used than b, but b is busy
    const forC = registry.acquire('c');
    // a is idle, b busy: a goes even though it was used last.
    const leaseC = await forC;
    expect(fake.closed).toEqual(['a']);
    expect(registry.models().map((model) => model.state)).toEqual(['unloaded', 'loaded', 'loaded']);
    // Now both loaded models are busy: a request for a waits until b (least recently used) is idle.
    let gotA = false;
    const forA = registry.acquire('a').then((lease) => {
      gotA = true;
      return lease;
    });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(gotA).toBe(false);
    expect(registry.find('b')?.state).toBe('loaded');
    // b takes no new request while it makes room: a request for it waits too.
    const forB = registry.acquire('b');
    heldB.release();
    const leaseA = await forA;
    expect(fake.closed).toEqual(['a', 'b']);
    leaseA.release();
    leaseC.release();
    (await forB).release();
    expect(await counter(registry, 'microbatch_model_loads_total', 'a')).toBe(2);
    expect(await counter(registry, 'microbatch_model_unloads_total', 'a')).toBe(1);
    expect(await counter(registry, 'microbatch_model_loads_total', 'b')).toBe(2);
    expect(await counter(registry, 'microbatch_model_loaded', 'b')).toBe(1);
    expect(
      (await counter(registry, 'microbatch_model_loaded', 'c')) +
        (await counter(registry, 'microbatch_model_loaded', 'a')),
    ).toBe(1);
    await registry.close();
  });

  it('bounds the requests waiting for a model and how long they wait', async () => {
    const fake = fakes();
    const registry = createModelRegistry([fake.definition('a'), fake.definition('b')], {
      maxLoadedModels: 1,
      maxWaiting: 1,
      loadWaitMs: 20,
    });
    const heldA = await registry.acquire('a');
    const first = registry.acquire('b');
    await expect(registry.acquire('b')).rejects.toMatchObject({ code: 'QUEUE_FULL', retryAfterSeconds: 1 });
    await expect(first).rejects.toMatchObject({ code: 'OVERLOADED' });
    heldA.release();
    const aborted = new AbortController();
    const third = registry.acquire('b', aborted.signal);
    aborted.abort();
    await expect(third).rejects.toMatchObject({ code: 'CLOSED' });
    await registry.close();
  });

  it("bounds each model's waiters by its own maxWaiting when it has one", async () => {
    const fake = fakes();
    const registry = createModelRegistry([fake.definition('a'), { ...fake.definition('b'), maxWaiting: 2 }], {
      maxLoadedModels: 1,
      maxWaiting: 1,
    });
    const heldA = await registry.acquire('a');
    const waiting = [registry.acquire('b'), registry.acquire('b')];
    await expect(registry.acquire('b')).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    heldA.release();
    for (const lease of await Promise.all(waiting)) lease.release();
    expect(() => createModelRegistry([{ ...fake.definition('c'), maxWaiting: 0 }])).toThrow(TypeError);
    await registry.close();
  });

  it('answers the waiters of a model that fails to load with 503 UNAVAILABLE, and tries again later', async () => {
    const fake = fakes();
    const registry = createModelRegistry([fake.definition('broken', 'lazy', true)]);
    await expect(registry.acquire('broken')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(registry.find('broken')?.state).toBe('unloaded');
    await expect(registry.acquire('broken')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(fake.created).toEqual(['broken', 'broken']);
    await registry.close();
  });

  it("is unready while a loaded model's own readiness is false (a replica's model without a live worker)", async () => {
    let workerAlive = false;
    const definition = {
      name: 'remote',
      task: 'text-generation',
      create: () =>
        ({
          id: 'remote',
          batchers: [],
          ready: Promise.resolve(),
          isReady: () => workerAlive,
          drain: async () => undefined,
          close: async () => undefined,
        }) as unknown as TextCompletionService,
    } satisfies ModelDefinition;
    const registry = createModelRegistry([definition]);
    await registry.ready;
    expect(await registry.unready()).toEqual(['the model "remote" is not ready']);
    workerAlive = true;
    expect(await registry.unready()).toEqual([]);
    await registry.close();
  });

  it('refuses duplicate names, unknown tasks and more eager models than may be loaded', () => {
    const fake = fakes();
    expect(() => createModelRegistry([fake.definition('a'), fake.definition('a')])).toThrow(/Two models are named "a"/);
    expect(() =>
      createModelRegistry([{ ...fake.definition('a'), task: 'translation' } as unknown as ModelDefinition]),
    ).toThrow(TypeError);
    expect(() =>
      createModelRegistry([fake.definition('a', 'eager'), fake.definition('b', 'eager')], { maxLoadedModels: 1 }),
    ).toThrow(/2 models load eagerly \(a, b\) but maxLoadedModels is 1/);
  });
});
