import { Admission } from './admission.js';
import { type AnyHandler, BatchRunner } from './batch-execution.js';
import { Dispatcher } from './dispatch.js';
import type { RunningBatch } from './item.js';
import { ItemWatcher } from './item-watch.js';
import { Lifecycle } from './lifecycle.js';
import { Emitter, StatsRecorder } from './metrics.js';
import { DEFAULT_OPTIONS, type ResolvedOptions, Settings } from './options.js';
import { Predictor } from './predictor.js';
import { QueueSet } from './queues.js';
import { Refusals } from './refusals.js';
import { Settlement } from './settlement.js';

/** The roles of one batcher, each built after the ones it reads (see {@link buildEngineParts}). */
export interface EngineParts {
  readonly settings: Settings;
  readonly lifecycle: Lifecycle;
  readonly queues: QueueSet;
  readonly emitter: Emitter;
  readonly stats: StatsRecorder;
  readonly predictor: Predictor;
  readonly refusals: Refusals;
  readonly settlement: Settlement;
  readonly admission: Admission;
  readonly dispatcher: Dispatcher;
  readonly watcher: ItemWatcher;
}

/**
 * Builds a batcher's roles in dependency order, so that none is wired after construction: the state first
 * (settings, the one `closed` state, the queues, the running batches), then the predictor that reads it, the
 * refusals that quote the predictor, settlement, admission, and the dispatcher, which builds its batch runner
 * (the runner reports back to it through the narrow `BatchLifecycle`), and last the watcher of cancellations and
 * deadlines, which hands items back to the dispatcher.
 */
export function buildEngineParts(
  handler: AnyHandler,
  streaming: boolean,
  options: ResolvedOptions<unknown>,
): EngineParts {
  const settings = new Settings(options);
  const lifecycle = new Lifecycle();
  const queues = new QueueSet();
  const emitter = new Emitter();
  const stats = new StatsRecorder();
  // The batches whose handler runs: written by the dispatcher only, read by the predictor.
  const running: RunningBatch[] = [];
  const predictor = new Predictor(options, settings, queues, running);
  const refusals = new Refusals(options, predictor);
  const settlement = new Settlement(options.clock, stats, emitter);
  // The defaults need no per-item work: admission and dispatch skip them.
  const batchKey = options.batchKey === DEFAULT_OPTIONS.batchKey ? undefined : options.batchKey;
  const cost = options.cost === DEFAULT_OPTIONS.cost ? undefined : options.cost;
  const admission = new Admission(options, queues, predictor, refusals, lifecycle, batchKey, cost);
  const { onBatchError } = options;
  const dispatcher = new Dispatcher(
    { options, settings, queues, running, predictor, refusals, lifecycle, stats, emitter, settlement },
    cost !== undefined,
    (batches) => new BatchRunner(handler, streaming, onBatchError, settlement, batches),
  );
  admission.evict = (item, refusal) => dispatcher.rejectQueued(item, refusal);
  const watcher = new ItemWatcher(options.clock, dispatcher);
  return {
    settings,
    lifecycle,
    queues,
    emitter,
    stats,
    predictor,
    refusals,
    settlement,
    admission,
    dispatcher,
    watcher,
  };
}
