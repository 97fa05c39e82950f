import { fileURLToPath } from 'node:url';

/** The bundled model, copied into `<repo>/models` by the root `pnpm install`. */
export const TINYSTORIES_DIR = fileURLToPath(new URL('../../../../models/tinystories-656k', import.meta.url));
