import { deferred } from '@microbatch/test-kit';
import { describe, expect, it, vi } from 'vitest';
import { exitOnSignals } from '../src/index.js';

describe('exitOnSignals', () => {
  it('shuts down once on the first signal, ignores repeats, and exits 0 (1 if the shutdown fails)', async () => {
    for (const code of [0, 1]) {
      const shutdown = vi.fn(() => (code === 0 ? Promise.resolve() : Promise.reject(new Error('stuck'))));
      const exited = deferred<number>();
      const log = vi.fn();
      const off = exitOnSignals(shutdown, { signals: ['SIGUSR2'], log, exit: exited.resolve });
      process.emit('SIGUSR2', 'SIGUSR2');
      process.emit('SIGUSR2', 'SIGUSR2');
      expect(await exited.promise).toBe(code);
      off();
      expect(shutdown).toHaveBeenCalledTimes(1);
      expect(log.mock.calls.map(([line]) => line)).toEqual([
        'SIGUSR2: no longer accepting requests; finishing the queued and running ones',
        'SIGUSR2: already draining',
        code === 0 ? 'drained and closed; exiting' : 'shutdown failed: stuck',
      ]);
    }
  });
});
