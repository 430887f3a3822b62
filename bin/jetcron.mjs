#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { register } from 'tsx/esm/api';

register();
// npx runs this file through a symlink in node_modules/.bin; resolve the package itself.
const self = realpathSync(fileURLToPath(import.meta.url));
await import(new URL('../src/cli/main.ts', pathToFileURL(self)).href);
