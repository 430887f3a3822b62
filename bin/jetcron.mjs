#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';

// npx runs this file through a symlink in node_modules/.bin; resolve the package itself.
const self = realpathSync(fileURLToPath(import.meta.url));
const { ensureNodeRuntime, runtimeEnv } = await import(new URL('../scripts/node-runtime.mjs', pathToFileURL(self)).href);
const node = ensureNodeRuntime();

if (node !== process.execPath) {
  // An older system Node: run the same command on the project's Node 24.
  const child = spawn(node, [...process.execArgv, self, ...process.argv.slice(2)], { stdio: 'inherit', env: runtimeEnv(node) });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] ?? 1)));
} else {
  // Node 24 strips the types itself: no loader, no source maps, positions as written. An
  // older Node, run on purpose (JETCRON_SYSTEM_NODE=1: the runtime benchmark's comparison), needs tsx's.
  if (!process.features.typescript) (await import('tsx/esm/api')).register();
  await import(new URL('../src/cli/main.ts', pathToFileURL(self)).href);
}
