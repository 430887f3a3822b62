// Runs before `npm install` may have happened: Node builtins only.
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureNodeRuntime, root, runtimeEnv } from './node-runtime.mjs';

const [command, ...args] = process.argv.slice(2);
const commands = {
  serve: ['bin/jetcron.mjs', 'serve'],
  test: ['scripts/run-tests.mjs'],
  bench: ['bench/run.ts'],
  install: null,
};

if (!command || !(command in commands)) {
  console.error('usage: node scripts/bootstrap.mjs serve|test|bench|install [args...]');
  process.exit(2);
}

// Everything below runs on the project's Node (scripts/node-runtime.mjs), npm included.
const node = ensureNodeRuntime();
const env = runtimeEnv(node);
ensureDependencies();
if (command === 'install') process.exit(0);
if (!(command === 'serve' && process.env.NATS_URL)) ensureNatsServer();
runAndExit([...commands[command], ...args]);

function ensureDependencies() {
  const lock = path.join(root, 'package-lock.json');
  const installed = path.join(root, 'node_modules', '.package-lock.json');
  const hasLock = existsSync(lock);
  const stale = !existsSync(installed) || (hasLock && statSync(lock).mtimeMs > statSync(installed).mtimeMs);
  if (!stale) return;
  const npmArgs = hasLock ? ['ci', '--no-audit', '--no-fund'] : ['install', '--no-audit', '--no-fund'];
  console.error(`bootstrap: npm ${npmArgs.join(' ')}`);
  run('npm', npmArgs, env);
}

function ensureNatsServer() {
  if (findNatsServer()) return;
  const isRoot = process.getuid?.() === 0;
  if (isRoot && existsSync('/etc/debian_version')) {
    console.error('bootstrap: nats-server not found, installing it with apt-get');
    const aptEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    run('apt-get', ['update'], aptEnv);
    run('apt-get', ['install', '-y', 'nats-server'], aptEnv);
    if (findNatsServer()) return;
  }
  console.error('nats-server not found: install it with `sudo apt-get install -y nats-server` (Debian/Ubuntu) or from https://nats.io');
  process.exit(1);
}

function findNatsServer() {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  return [...dirs.map((dir) => path.join(dir, 'nats-server')), '/usr/sbin/nats-server'].find((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

function run(file, fileArgs, env = process.env) {
  const result = spawnSync(file, fileArgs, { cwd: root, stdio: 'inherit', env });
  if (result.error) {
    console.error(`bootstrap: cannot run ${file}: ${result.error.message}`);
    process.exit(1);
  }
  if (result.status !== 0) {
    console.error(`bootstrap: ${file} ${fileArgs.join(' ')} failed`);
    process.exit(result.status ?? 1);
  }
}

function runAndExit(nodeArgs) {
  // The service must not outlive a SIGKILLed `npm start` (this process): on Linux it gets
  // SIGTERM when we die and shuts down cleanly with its embedded servers. Same as
  // src/runtime/die-with-parent.ts, which this file cannot import (it runs before npm install).
  const [file, fileArgs] = withPdeathsig(node, nodeArgs);
  const child = spawn(file, fileArgs, { cwd: root, stdio: 'inherit', env });
  const forward = (signal) => child.kill(signal);
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, forward);
  child.on('error', (err) => {
    console.error(`bootstrap: ${err.message}`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    process.exit(code ?? 128 + (os.constants.signals[signal] ?? 1));
  });
}

function withPdeathsig(file, fileArgs) {
  if (os.platform() !== 'linux') return [file, fileArgs];
  const probe = spawnSync('setpriv', ['--pdeathsig', 'SIGTERM', '--', 'setpriv', '--version'], { stdio: 'ignore' });
  return probe.status === 0 ? ['setpriv', ['--pdeathsig', 'SIGTERM', '--', file, ...fileArgs]] : [file, fileArgs];
}
