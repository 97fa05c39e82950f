#!/usr/bin/env node
// The in-repository launcher: tsx compiles the CLI and the workspace's packages (the Nest app with decorators) from
// their sources on the fly, with the repository's tsconfig. Nothing to build first. (Installed, the CLI runs dist/.)
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register({ tsconfig: fileURLToPath(new URL('../../../tsconfig.json', import.meta.url)) });
await import('../src/main.ts');
