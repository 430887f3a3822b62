#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import module from 'node:module';
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
  enableCompileCache();
  await import(new URL('../src/cli/main.ts', pathToFileURL(self)).href);
}

/**
 * Node keeps each module's compiled code, and the TypeScript it stripped, in a cache
 * directory (NODE_COMPILE_CACHE, else `<tmp>/node-compile-cache`; checked against the
 * source, so an edit is never served stale): loading the CLI's modules costs about half
 * the CPU from the second run on (~0.25 s less of a rebuild's main thread, ~0.1 s of its
 * preparing thread). The variable passes it on to worker threads and child processes,
 * which do not inherit a cache enabled here. A directory that cannot be written
 * leaves the cache off; NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
function enableCompileCache() {
  const { status, directory } = module.enableCompileCache?.() ?? {};
  const on = status === module.constants?.compileCacheStatus?.ENABLED || status === module.constants?.compileCacheStatus?.ALREADY_ENABLED;
  if (on && directory) process.env.NODE_COMPILE_CACHE = directory;
}
