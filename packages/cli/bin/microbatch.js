#!/usr/bin/env node
// The CLI serves the example apps, which are TypeScript workspace packages (the Nest one with decorators): tsx
// compiles them, and the workspace's packages, on the fly with the repository's tsconfig. Nothing to build first.
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register({ tsconfig: fileURLToPath(new URL('../../../tsconfig.json', import.meta.url)) });
await import('../src/main.ts');
