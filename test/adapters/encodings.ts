// Hono's `jsonBody` reads with Web APIs only: it decodes what the runtime's `DecompressionStream` decodes, and
// Node 20's has no brotli. Its 415 for an unknown `Content-Encoding` names what it does decode, so there, and only
// there, the message lists one encoding fewer than the other adapters'.

/** Whether this runtime's `DecompressionStream` decodes brotli. */
function webBrotli(): boolean {
  try {
    new DecompressionStream('brotli' as 'gzip');
    return true;
  } catch {
    return false;
  }
}

/** The 415 message for an unknown `Content-Encoding` on `framework`. */
export function unsupportedEncodingMessage(framework: string): string {
  const encodings = framework === 'Hono' && !webBrotli() ? 'gzip, deflate' : 'gzip, deflate, br';
  return `Unsupported Content-Encoding: use ${encodings} or identity`;
}
