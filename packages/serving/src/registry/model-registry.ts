// Several models in one process, chosen per request by name: each loaded eagerly at start-up or lazily on its first
// request; at most `maxLoadedModels` loaded at once, the least recently used idle one unloaded (its worker threads
// terminated) before another loads. Requests for a model that is loading wait for it (bounded by `loadWaitMs` and
// `maxWaiting`), so none is ever served by a half-loaded model.
import { BatchError, DEFAULTS } from '@microbatch/core';
import { checkInteger, fail } from '@microbatch/core/util';
import type { Registry } from 'prom-client';
import type { Logger } from '../service/batch-log.js';
import { ModelMetrics } from './model-metrics.js';
import { MODEL_TASK_NAMES, type ModelServices, type ModelTask } from './model-tasks.js';

/** What a served model's service has in common, whatever its task. */
export type ModelService = ModelServices[ModelTask];

/**
 * One model of a registry: its name (the `model` of requests), its task, and how to start it.
 *
 * @example
 * ```ts
 * const chat: ModelDefinition = {
 *   name: 'chat', task: 'text-generation', load: 'lazy',
 *   create: () => createTextCompletionModel({ model: 'models/tinystories-656k', id: 'chat' }),
 * };
 * ```
 */
export type ModelDefinition = {
  [Task in ModelTask]: {
    readonly name: string;
    readonly task: Task;
    /**
     * `eager`: loaded at start-up (readiness waits for it); `lazy`: on its first request.
     * @default 'eager'
     */
    readonly load?: 'eager' | 'lazy';
    /**
     * The most requests waiting for this model to load (then 503 `QUEUE_FULL`); its batchers' `maxQueueSize` is the
     * natural value.
     * @default the registry's `maxWaiting`
     */
    readonly maxWaiting?: number;
    /** Starts the model's service (its worker threads); called again after an unload. Its `id` should be `name`. */
    readonly create: () => ModelServices[Task];
  };
}[ModelTask];

/**
 * Options of {@link createModelRegistry}.
 *
 * @example
 * ```ts
 * const options: ModelRegistryOptions = { maxLoadedModels: 1, loadWaitMs: 60_000 };
 * ```
 */
export interface ModelRegistryOptions {
  /**
   * The most models loaded at once; a model to load beyond it first unloads the least recently used idle one.
   * @default every model
   */
  readonly maxLoadedModels?: number;
  /**
   * The most requests waiting for one model to load; more are refused (503 `QUEUE_FULL` + `Retry-After`).
   * @default core's DEFAULTS.maxQueueSize (1024)
   */
  readonly maxWaiting?: number;
  /**
   * How long a request waits for its model to load (or for room to load it), then 503 `OVERLOADED` + `Retry-After`.
   * Keep it under the HTTP server's idle timeout (core's `checkDeadlineFits`), so the 503 reaches the client.
   * @default 30000
   */
  readonly loadWaitMs?: number;
  /** Loads, unloads and load failures are logged here. */
  readonly logger?: Logger;
}

/** A model as the registry reports it (`/v1/models`). */
export interface ModelState {
  readonly name: string;
  readonly task: ModelTask;
  readonly load: 'eager' | 'lazy';
  readonly state: 'unloaded' | 'loading' | 'loaded' | 'unloading';
  /** Requests being answered by it now. */
  readonly inFlight: number;
}

/** A request's hold on a loaded model: its service; `release()` once answered (the model is idle at none). */
export interface ModelLease {
  readonly name: string;
  readonly task: ModelTask;
  readonly service: ModelService;
  /** The model's own metrics registry for this load (labelled `model`; merged into the registry's `metrics`). */
  readonly metrics: Registry;
  release(): void;
}

interface Waiter {
  readonly since: number;
  readonly resolve: (lease: ModelLease) => void;
  readonly reject: (error: unknown) => void;
}

interface Loaded {
  readonly service: ModelService;
  readonly metrics: Registry;
}

class Slot {
  state: ModelState['state'] = 'unloaded';
  loaded: Loaded | undefined;
  inFlight = 0;
  lastUsed = 0;
  /** Chosen to make room: takes no new request, unloads once idle. */
  evicting = false;
  readonly waiters: Waiter[] = [];
  readonly definition: ModelDefinition;
  readonly load: 'eager' | 'lazy';
  readonly maxWaiting: number;
  constructor(definition: ModelDefinition, maxWaiting: number) {
    this.definition = definition;
    this.load = definition.load ?? 'eager';
    this.maxWaiting = maxWaiting;
  }
}

/** What {@link createModelRegistry} returns. */
export interface ModelRegistry {
  /** How long a request waits for its model (the option, resolved). */
  readonly loadWaitMs: number;
  /** The models, in the definitions' order. */
  readonly models: () => readonly ModelState[];
  /** The model named `name`, or `undefined`. */
  readonly find: (name: string) => ModelState | undefined;
  /** The loaded `name` for one request, waiting while it loads; rejects with a `BatchError` (503) past the bounds. */
  readonly acquire: (name: string, signal?: AbortSignal) => Promise<ModelLease>;
  /** Resolves once every eager model loaded; rejects with the first failure. */
  readonly ready: Promise<void>;
  /** Whether every eager model has loaded and the registry is not closed. */
  readonly isReady: () => boolean;
  /**
   * Why the registry cannot serve now, empty when it can: not every eager model loaded, closed, or a loaded model's
   * own `isReady()` false (a batcher closed; on a web replica, no live worker or broker).
   */
  readonly unready: () => Promise<string[]>;
  /** The registry's and every loaded model's metrics (labelled `model`). */
  readonly metrics: ModelMetrics;
  /** Refuses new requests (503 `CLOSED`) and drains every loaded model's batchers. */
  readonly drain: () => Promise<void>;
  /** Drains, then closes every model (their worker threads). */
  readonly close: () => Promise<void>;
}

/**
 * A registry of models served by one process, each chosen per request by name (see the file's opening comment).
 * Definitions are checked at once: names unique and non-empty, tasks known, at most `maxLoadedModels` eager ones.
 *
 * @example
 * ```ts
 * const registry = createModelRegistry([chat, embedder], { maxLoadedModels: 1 });
 * const lease = await registry.acquire('chat');
 * try { await answer(lease.service); } finally { lease.release(); }
 * ```
 */
export function createModelRegistry(
  definitions: readonly ModelDefinition[],
  options: ModelRegistryOptions = {},
): ModelRegistry {
  if (!Array.isArray(definitions) || definitions.length === 0) fail('models', 'a non-empty array', definitions);
  const slots = new Map<string, Slot>();
  const maxWaiting = options.maxWaiting ?? DEFAULTS.maxQueueSize;
  checkInteger('maxWaiting', maxWaiting, 1);
  for (const definition of definitions) {
    if (typeof definition.name !== 'string' || definition.name === '')
      fail('name', 'a non-empty string', definition.name);
    if (!MODEL_TASK_NAMES.includes(definition.task))
      fail(`${definition.name}.task`, MODEL_TASK_NAMES.join(' | '), definition.task);
    if (slots.has(definition.name)) throw new TypeError(`Two models are named ${JSON.stringify(definition.name)}`);
    const own = definition.maxWaiting ?? maxWaiting;
    checkInteger(`${definition.name}.maxWaiting`, own, 1);
    slots.set(definition.name, new Slot(definition, own));
  }
  const maxLoaded = options.maxLoadedModels ?? slots.size;
  checkInteger('maxLoadedModels', maxLoaded, 1);
  const loadWaitMs = options.loadWaitMs ?? 30_000;
  checkInteger('loadWaitMs', loadWaitMs, 1);
  const eager = [...slots.values()].filter((slot) => slot.load === 'eager');
  if (eager.length > maxLoaded) {
    throw new TypeError(
      `${eager.length} models load eagerly (${eager.map((slot) => slot.definition.name).join(', ')}) but ` +
        `maxLoadedModels is ${maxLoaded}: make some \`load: lazy\` or raise maxLoadedModels`,
    );
  }
  const logger = options.logger;
  const metrics = new ModelMetrics([...slots.keys()], (name) => slots.get(name)?.state === 'loaded');
  let closed = false;
  let clock = 0; // an order of use, not a time: the least recently used is the smallest
  const pending = new Set<Promise<unknown>>();
  const track = <T>(promise: Promise<T>): Promise<T> => {
    pending.add(promise);
    promise.then(
      () => pending.delete(promise),
      () => pending.delete(promise),
    );
    return promise;
  };

  const lease = (slot: Slot): ModelLease => {
    const loaded = slot.loaded as Loaded;
    slot.inFlight += 1;
    slot.lastUsed = ++clock;
    let released = false;
    return {
      name: slot.definition.name,
      task: slot.definition.task,
      service: loaded.service,
      metrics: loaded.metrics,
      release: () => {
        if (released) return;
        released = true;
        slot.inFlight -= 1;
        slot.lastUsed = ++clock;
        pump();
      },
    };
  };

  const load = (slot: Slot): Promise<void> => {
    const { definition } = slot;
    slot.state = 'loading';
    logger?.info({ model: definition.name, task: definition.task }, 'loading model');
    const loading = (async () => {
      let service: ModelService | undefined;
      try {
        service = definition.create();
        await service.ready;
        slot.loaded = { service, metrics: metrics.modelRegistry(definition.name) };
        slot.state = 'loaded';
        slot.lastUsed = ++clock;
        metrics.loaded(definition.name);
        logger?.info({ model: definition.name, task: definition.task }, 'model loaded');
      } catch (error) {
        slot.state = 'unloaded';
        metrics.dropModel(definition.name);
        await service?.close().catch(() => undefined);
        logger?.error({ model: definition.name, err: error }, 'model failed to load');
        const refusal = new BatchError('UNAVAILABLE', `The model ${JSON.stringify(definition.name)} failed to load`, {
          retryAfterSeconds: 5,
        });
        for (const waiter of slot.waiters.splice(0)) waiter.reject(refusal);
        throw error;
      } finally {
        pump();
      }
    })();
    return track(loading);
  };

  const unload = (slot: Slot, reason: string): void => {
    const { definition } = slot;
    const loaded = slot.loaded as Loaded;
    slot.state = 'unloading';
    slot.loaded = undefined;
    metrics.dropModel(definition.name);
    logger?.info({ model: definition.name, reason }, 'unloading model');
    void track(
      loaded.service
        .close()
        .catch((error: unknown) => logger?.error({ model: definition.name, err: error }, 'model failed to close'))
        .finally(() => {
          slot.state = 'unloaded';
          slot.evicting = false;
          metrics.unloaded(definition.name);
          logger?.info({ model: definition.name }, 'model unloaded');
          pump();
        }),
    );
  };

  /** Serves what can be served, unloads what was chosen and is idle, and loads the model waited for longest. */
  const pump = (): void => {
    if (closed) return;
    for (const slot of slots.values()) {
      if (slot.state === 'loaded' && !slot.evicting)
        for (const waiter of slot.waiters.splice(0)) waiter.resolve(lease(slot));
      if (slot.state === 'loaded' && slot.evicting && slot.inFlight === 0) unload(slot, 'making room');
    }
    const wanted = [...slots.values()]
      .filter((slot) => slot.state === 'unloaded' && slot.waiters.length > 0)
      .sort((a, b) => (a.waiters[0] as Waiter).since - (b.waiters[0] as Waiter).since);
    for (const slot of wanted) {
      const occupied = [...slots.values()].filter((other) => other.state !== 'unloaded').length;
      if (occupied < maxLoaded) {
        load(slot).catch(() => undefined);
        continue;
      }
      // Full: one model at a time makes room, the least recently used, an idle one first.
      if ([...slots.values()].some((other) => other.evicting || other.state === 'unloading')) return;
      const victim = [...slots.values()]
        .filter((other) => other.state === 'loaded')
        .sort((a, b) => Number(a.inFlight > 0) - Number(b.inFlight > 0) || a.lastUsed - b.lastUsed)[0];
      if (victim === undefined) return; // every slot is loading: wait for one to finish
      victim.evicting = true;
      logger?.info(
        { model: victim.definition.name, for: slot.definition.name, inFlight: victim.inFlight },
        'making room: unloading the least recently used model once idle',
      );
      if (victim.inFlight === 0) unload(victim, `making room for ${slot.definition.name}`);
      return;
    }
  };

  const acquire = (name: string, signal?: AbortSignal): Promise<ModelLease> => {
    const slot = slots.get(name);
    if (slot === undefined)
      return Promise.reject(new BatchError('NOT_FOUND', `No model named ${JSON.stringify(name)}`));
    if (closed) return Promise.reject(new BatchError('CLOSED', 'The server is shutting down'));
    if (slot.state === 'loaded' && !slot.evicting && slot.waiters.length === 0) return Promise.resolve(lease(slot));
    if (slot.waiters.length >= slot.maxWaiting) {
      return Promise.reject(
        new BatchError('QUEUE_FULL', `${slot.maxWaiting} requests already wait for the model ${JSON.stringify(name)}`, {
          retryAfterSeconds: 1,
        }),
      );
    }
    return new Promise<ModelLease>((resolve, reject) => {
      const remove = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const index = slot.waiters.indexOf(waiter);
        if (index >= 0) slot.waiters.splice(index, 1);
      };
      const waiter: Waiter = {
        since: ++clock,
        resolve: (held) => {
          remove();
          resolve(held);
        },
        reject: (error) => {
          remove();
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        waiter.reject(
          new BatchError('OVERLOADED', `The model ${JSON.stringify(name)} did not load within ${loadWaitMs} ms`, {
            retryAfterSeconds: 1,
          }),
        );
      }, loadWaitMs);
      const onAbort = () => waiter.reject(new BatchError('CLOSED', 'The client went away'));
      signal?.addEventListener('abort', onAbort, { once: true });
      slot.waiters.push(waiter);
      pump();
    });
  };

  const ready = Promise.all(eager.map((slot) => load(slot))).then(() => undefined);
  ready.catch(() => undefined);
  let eagerLoaded = eager.length === 0;
  ready.then(
    () => {
      eagerLoaded = true;
    },
    () => undefined,
  );

  const loadedServices = (): ModelService[] =>
    [...slots.values()].flatMap((slot) => (slot.loaded === undefined ? [] : [slot.loaded.service]));

  const drain = async (): Promise<void> => {
    closed = true;
    const refusal = new BatchError('CLOSED', 'The server is shutting down');
    for (const slot of slots.values()) for (const waiter of slot.waiters.splice(0)) waiter.reject(refusal);
    await Promise.all(loadedServices().map((service) => service.drain()));
  };

  const stateOf = (slot: Slot): ModelState => ({
    name: slot.definition.name,
    task: slot.definition.task,
    load: slot.load,
    state: slot.state,
    inFlight: slot.inFlight,
  });

  return {
    loadWaitMs,
    models: () => [...slots.values()].map(stateOf),
    find: (name) => {
      const slot = slots.get(name);
      return slot === undefined ? undefined : stateOf(slot);
    },
    acquire,
    ready,
    isReady: () => eagerLoaded && !closed,
    unready: async () => {
      if (closed) return ['the server is shutting down'];
      if (!eagerLoaded) return ['the eager models are not all loaded'];
      const loaded = [...slots.values()].filter((slot) => slot.loaded !== undefined);
      // `isReady()` may answer at once or with a promise (a replica asks its broker).
      const states = await Promise.all(loaded.map(async (slot) => (slot.loaded as Loaded).service.isReady()));
      return loaded.flatMap((slot, index) =>
        states[index] === true ? [] : [`the model ${JSON.stringify(slot.definition.name)} is not ready`],
      );
    },
    metrics,
    drain,
    close: async () => {
      await drain();
      await Promise.allSettled(pending);
      await Promise.all(loadedServices().map((service) => service.close()));
    },
  };
}
