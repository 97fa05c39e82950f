// `GET /healthz` sampled while a server is loaded: one request at a time, every 20 ms, on its own keep-alive
// connection, so its latency is how long the server's event loop made a trivial route wait.
import { Agent, get } from 'node:http';

/** Starts sampling `url`'s `/healthz`; `stop()` ends it and resolves with the p99 latency in ms (NaN if none). */
export function sampleHealth(url: string): { stop(): Promise<number> } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let running = true;
  const once = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const request = get(`${url}/healthz`, { agent, timeout: 30_000 }, (res) => {
        res.resume();
        res.on('end', () => {
          latencies.push(performance.now() - started);
          resolve();
        });
      });
      request.on('error', () => resolve());
      request.on('timeout', () => request.destroy());
    });
  const loop = (async () => {
    while (running) {
      await once();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      if (latencies.length === 0) return Number.NaN;
      latencies.sort((a, b) => a - b);
      return latencies[Math.min(latencies.length - 1, Math.ceil(latencies.length * 0.99) - 1)] as number;
    },
  };
}
