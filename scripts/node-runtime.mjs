// The Node.js runtime jetcron runs on: Node 24 LTS, whatever Node the machine has.
// Runs before `npm install` may have happened: Node builtins only.
//
// A machine whose system Node is older (Debian's, say) gets the official Node binary
// from the npm registry (`node-<platform>-<arch>`, the same tarball nodejs.org ships,
// checked by npm against the registry's integrity hash), unpacked once under
// `.runtime/` in the project. Every command the project runs (npm ci, the service,
// the tests, the bench, the CLI) then runs on it, with its `bin/` first on the PATH so
// that `npm` and any `node` a script starts resolve to it too.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pinned = readFileSync(path.join(root, '.node-version'), 'utf8').trim();
const major = Number(pinned.split('.')[0]);

/** The node binary to run the project with, installing the pinned one if needed. */
export function ensureNodeRuntime({ log = (line) => console.error(line) } = {}) {
  if (Number(process.versions.node.split('.')[0]) === major) return process.execPath;
  if (process.env.JETCRON_SYSTEM_NODE === '1') return process.execPath;
  const dir = path.join(root, '.runtime', `node-v${pinned}-${process.platform}-${process.arch}`);
  const binary = path.join(dir, 'bin', 'node');
  if (existsSync(binary)) return binary;
  log(`bootstrap: Node ${process.versions.node} is not Node ${major}; installing Node ${pinned} from the npm registry into ${path.relative(root, dir)}`);
  install(dir);
  return binary;
}

/** The environment for a child: the runtime's bin directory first on the PATH. */
export function runtimeEnv(binary, env = process.env) {
  const binDir = path.dirname(binary);
  const rest = (env.PATH ?? '').split(path.delimiter).filter((dir) => dir && dir !== binDir);
  return { ...env, PATH: [binDir, ...rest].join(path.delimiter) };
}

function install(dir) {
  const name = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}`;
  mkdirSync(path.dirname(dir), { recursive: true });
  const work = mkdtempSync(path.join(path.dirname(dir), '.install-'));
  try {
    const packed = spawnSync('npm', ['pack', `${name}@${pinned}`, '--pack-destination', work, '--silent', '--no-audit', '--no-fund'], {
      cwd: work,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const file = packed.stdout?.trim().split('\n').pop();
    if (packed.status !== 0 || !file) fail(`npm pack ${name}@${pinned} failed${packed.error ? `: ${packed.error.message}` : ''}`);
    const unpacked = path.join(work, 'unpacked');
    mkdirSync(unpacked);
    const tar = spawnSync('tar', ['xzf', path.join(work, file), '-C', unpacked, '--strip-components=1'], { stdio: 'inherit' });
    if (tar.status !== 0) fail(`cannot unpack ${file}`);
    const check = spawnSync(path.join(unpacked, 'bin', 'node'), ['--version'], { encoding: 'utf8' });
    if (check.stdout?.trim() !== `v${pinned}`) fail(`the unpacked node answers ${JSON.stringify(check.stdout ?? check.error?.message)}`);
    // A rename is atomic: a second bootstrap racing this one sees all of it or none.
    try {
      renameSync(unpacked, dir);
    } catch (err) {
      if (!existsSync(path.join(dir, 'bin', 'node'))) throw err;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function fail(message) {
  console.error(`bootstrap: ${message}`);
  console.error(`bootstrap: install Node ${major} yourself and put it first on the PATH, or set JETCRON_SYSTEM_NODE=1 to run on ${process.version}`);
  process.exit(1);
}

