// What the driver and the bench servers agree on, kept apart from both so that importing it starts nothing.

/** The route of the stats snapshot on every bench server (POST: it also resets the event-loop delay histogram). */
export const SNAPSHOT_PATH = '/_bench/snapshot';

/** The first stdout line of a bench server. */
export interface ReadyLine {
  readonly ready: true;
  readonly port: number;
  readonly pid: number;
}

/** Cumulative counters since start; the driver takes one before and one after a measurement and subtracts. */
export interface StatsSnapshot {
  readonly batches: number;
  readonly items: number;
  readonly failed: number;
  /** Items queued or running now (the driver waits for 0 between measurements). */
  readonly queueLength: number;
  readonly inFlightBatches: number;
  /** Sum of handler-call durations: the worker's busy time plus its messaging, as seen from the event loop. */
  readonly executionMs: number;
  readonly queueWaitMs: number;
  /** Token positions sent to the model, without and with padding (0 where the main thread cannot count them). */
  readonly realTokens: number;
  readonly paddedTokens: number;
  /** Workers started to replace a crashed or aborted one (must stay 0 while measuring). */
  readonly poolRestarts: number;
  /** Event-loop active/idle time (performance.eventLoopUtilization), in ms. */
  readonly loopActiveMs: number;
  readonly loopIdleMs: number;
  /** Event-loop delay since the previous snapshot, in ms. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  /** CPU time of the whole server process (event loop, worker thread, GC), in ms. */
  readonly cpuMs: number;
  /** OVERLOADED refusals by cause, and the latency estimate (what latency-aware admission decided from). */
  readonly overloaded: Readonly<Record<string, number>>;
  readonly estimate: { readonly ready: boolean; readonly msPerCost: number; readonly msPerBatch: number };
}
