// CPU time of the calling thread (Linux: /proc/thread-self/stat), so benchmarks can tell a runner's own cost from
// the time it waited for a core on a busy machine. 0 where the file does not exist.
import { readFileSync } from 'node:fs';

/** User + system CPU time of the current thread, in ms (10 ms resolution). */
export function threadCpuMs(): number {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    // Fields after the command name (which may contain spaces) start at the last ')'; utime and stime are the
    // 14th and 15th fields, in clock ticks of 10 ms.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}
