// The metrics of a multi-model process: each loaded model records into a registry of its own (its batchers are
// named alike in every model: `generate`, `stream`, `embed`), labelled `model` there; `/metrics` and the dashboard
// read one registry that merges them with the registry's own series (loads, unloads, which models are loaded).
import { AggregatorRegistry, Counter, Gauge, Registry } from 'prom-client';

/** Where a loaded model's series go, and the registry `/metrics` reads. */
export class ModelMetrics extends Registry {
  readonly #models = new Map<string, Registry>();
  readonly #loads: Counter<'model'>;
  readonly #unloads: Counter<'model'>;

  constructor(names: readonly string[], isLoaded: (name: string) => boolean) {
    super();
    this.#loads = new Counter({
      name: 'microbatch_model_loads_total',
      help: 'Models loaded (their worker threads started), by model',
      labelNames: ['model'],
      registers: [this],
    });
    this.#unloads = new Counter({
      name: 'microbatch_model_unloads_total',
      help: 'Models unloaded (their worker threads terminated) to make room for another, by model',
      labelNames: ['model'],
      registers: [this],
    });
    new Gauge({
      name: 'microbatch_model_loaded',
      help: '1 while the model is loaded, else 0',
      labelNames: ['model'],
      registers: [this],
      collect() {
        for (const name of names) this.set({ model: name }, isLoaded(name) ? 1 : 0);
      },
    });
    // Every model's series exist from the start, at 0.
    for (const name of names) {
      this.#loads.inc({ model: name }, 0);
      this.#unloads.inc({ model: name }, 0);
    }
  }

  /** A fresh registry for a model being loaded (its earlier one, if any, is dropped with its series). */
  modelRegistry(name: string): Registry {
    const registry = new Registry();
    registry.setDefaultLabels({ model: name });
    this.#models.set(name, registry);
    return registry;
  }

  /** The model's series go with its workers. */
  dropModel(name: string): void {
    this.#models.delete(name);
  }

  loaded(name: string): void {
    this.#loads.inc({ model: name });
  }

  unloaded(name: string): void {
    this.#unloads.inc({ model: name });
  }

  override async getMetricsAsJSON(): ReturnType<Registry['getMetricsAsJSON']> {
    return (await this.#merged()).getMetricsAsJSON();
  }

  override async metrics(): Promise<string> {
    return (await this.#merged()).metrics();
  }

  /** The registry's own series and every loaded model's: one family per name, the `model` label telling them apart. */
  async #merged(): Promise<Registry> {
    const own = await super.getMetricsAsJSON();
    const models = await Promise.all([...this.#models.values()].map((registry) => registry.getMetricsAsJSON()));
    return AggregatorRegistry.aggregate([own, ...models]);
  }
}
