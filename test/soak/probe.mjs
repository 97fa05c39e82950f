// Loaded into a soaked server with `node --import` (main thread only): every SOAK_PROBE_MS it appends one JSON line
// to SOAK_PROBE_FILE with the process's RSS, V8 heap, external memory, active handles (resources keeping the loop
// alive), open file descriptors (/proc/self/fd) and the event loop's delay since the last line. The server's code
// is unchanged: nothing here is part of microbatch. Under `--expose-gc` each sample follows a full collection.
import { appendFileSync, readdirSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

const file = process.env.SOAK_PROBE_FILE;
if (isMainThread && file !== undefined && file !== '') {
  const every = Number(process.env.SOAK_PROBE_MS ?? 10_000);
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const sample = () => {
    // With `--expose-gc` (run-soak.ts passes it), a full collection first: heap and RSS are then what is kept, not
    // where the young generation happened to be.
    globalThis.gc?.();
    const memory = process.memoryUsage();
    let fds = -1;
    try {
      fds = readdirSync('/proc/self/fd').length;
    } catch {
      // no /proc: recorded as -1
    }
    const line = {
      at: Date.now(),
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      external: memory.external,
      handles: process.getActiveResourcesInfo().length,
      fds,
      loopP99Ms: delay.percentile(99) / 1e6,
      loopMaxMs: delay.max / 1e6,
    };
    delay.reset();
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  };
  setInterval(sample, every).unref();
  sample();
}
