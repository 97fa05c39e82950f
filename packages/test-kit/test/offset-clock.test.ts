// OffsetClock: real time plus a test's jumps. Every check counts the timers that fired and their order; the only
// waits are for a real timer to fire (vitest's timeout is the hang guard), never a duration asserted.
import { describe, expect, it } from 'vitest';
import { OffsetClock, deferred } from '../src/index.js';

const HOUR = 3_600_000;

describe('OffsetClock', () => {
  it('jumps forward by what advance says, and never back', () => {
    const clock = new OffsetClock();
    const before = clock.now();
    clock.advance(HOUR);
    const after = clock.now();
    expect(after - before).toBeGreaterThanOrEqual(HOUR);
    clock.advance(0);
    expect(clock.now()).toBeGreaterThanOrEqual(after);
  });

  it('fires exactly the timers a jump reaches, in time order, and says how many', () => {
    const clock = new OffsetClock();
    const fired: string[] = [];
    clock.setTimeout(() => fired.push('one hour'), HOUR);
    clock.setTimeout(() => fired.push('half an hour'), HOUR / 2);
    const later = clock.setTimeout(() => fired.push('two hours'), 2 * HOUR);
    expect(clock.pendingTimers).toBe(3);

    expect(clock.advance(HOUR / 2 - 60_000)).toBe(0);
    expect(fired).toEqual([]);
    expect(clock.advance(60_000)).toBe(1);
    expect(fired).toEqual(['half an hour']);
    expect(clock.advance(HOUR / 2)).toBe(1);
    expect(fired).toEqual(['half an hour', 'one hour']);

    clock.clearTimeout(later);
    expect(clock.pendingTimers).toBe(0);
    expect(clock.advance(2 * HOUR)).toBe(0);
    expect(fired).toEqual(['half an hour', 'one hour']);
  });

  it('fires several timers of one jump in time order, skipping one an earlier callback cleared', () => {
    const clock = new OffsetClock();
    const fired: number[] = [];
    const third = clock.setTimeout(() => fired.push(3), 3 * HOUR);
    clock.setTimeout(() => fired.push(2), 2 * HOUR);
    clock.setTimeout(() => {
      fired.push(1);
      clock.clearTimeout(third);
    }, HOUR);
    expect(clock.advance(3 * HOUR)).toBe(2);
    expect(fired).toEqual([1, 2]);
  });

  it('lets a timer the jumps do not reach fire on real time, once', async () => {
    const clock = new OffsetClock();
    const done = deferred();
    let count = 0;
    clock.setTimeout(() => {
      count += 1;
      done.resolve();
    }, 5);
    expect(clock.advance(0)).toBe(0);
    await done.promise;
    expect(count).toBe(1);
    expect(clock.pendingTimers).toBe(0);
    expect(clock.advance(HOUR)).toBe(0);
    expect(count).toBe(1);
  });

  it('does not fire again on real time a timer a jump already fired', async () => {
    const clock = new OffsetClock();
    let count = 0;
    clock.setTimeout(() => (count += 1), 20);
    expect(clock.advance(20)).toBe(1);
    // A real timer set after it, for longer: by the time it fires, the first one's real timer would have too.
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(count).toBe(1);
  });

  it('runs a timer set by a callback during a jump on real time, not inside the jump', async () => {
    const clock = new OffsetClock();
    const done = deferred();
    const fired: string[] = [];
    clock.setTimeout(() => {
      fired.push('first');
      clock.setTimeout(() => {
        fired.push('re-armed');
        done.resolve();
      }, 0);
    }, HOUR);
    expect(clock.advance(HOUR)).toBe(1);
    expect(fired).toEqual(['first']);
    await done.promise;
    expect(fired).toEqual(['first', 're-armed']);
  });

  it('refuses a jump that is not a finite number >= 0', () => {
    const clock = new OffsetClock();
    expect(() => clock.advance(-1)).toThrow(
      new TypeError('Expected `ms` to be a finite number >= 0, got `-1` (number)'),
    );
    expect(() => clock.advance(Number.NaN)).toThrow(TypeError);
    expect(() => clock.advance(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(() => clock.advance('5' as unknown as number)).toThrow(
      new TypeError('Expected `ms` to be a finite number >= 0, got `5` (string)'),
    );
  });
});
