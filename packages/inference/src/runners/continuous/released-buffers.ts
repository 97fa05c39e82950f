// Frees the array buffers of outputs the decode loop has finished with, at once, instead of leaving them to V8.
//
// onnxruntime-node returns every output, the whole KV cache included, in fresh array buffers (~4 MB a step at 64
// rows). V8 counts them as external memory and starts a full mark-compact of the worker's heap (transformers.js and
// the tokenizer included) each time another 64 MB of it has been allocated: every ~17 steps, its marking threads
// competing with the worker for the cores. Transferring a buffer to a port whose other end is closed detaches it and
// drops its memory with the message, so the counter never grows. Only buffers nothing reads any more come here.
import { MessageChannel } from 'node:worker_threads';

const { port1: sink, port2 } = new MessageChannel();
port2.close();
sink.unref();

/**
 * Detaches and frees the buffers under `arrays` (each once; views of a buffer already freed are skipped). After this
 * the arrays read as empty: callers pass only arrays that no row, feed or pool still points into.
 *
 * @example
 * ```ts
 * const token = sampleToken(logits, sampling);
 * releaseBuffers([logits]);
 * ```
 */
export function releaseBuffers(arrays: readonly ArrayBufferView[]): void {
  const buffers = new Set<ArrayBuffer>();
  for (const array of arrays) {
    const { buffer } = array;
    if (buffer instanceof ArrayBuffer && buffer.byteLength > 0) buffers.add(buffer);
  }
  if (buffers.size === 0) return;
  try {
    sink.postMessage(null, [...buffers]);
  } catch {
    // A buffer that cannot be transferred (not one onnxruntime-node returns today) is left to the garbage collector.
  }
}
