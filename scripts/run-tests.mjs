// One embedded Postgres for the whole run; each test creates its own database on it.
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
const { startEmbeddedPostgres } = await import('../src/runtime/embedded-postgres.ts');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const runnerFlags = args.filter((arg) => arg.startsWith('--'));
const filters = args.filter((arg) => !arg.startsWith('--'));

const files = (await Promise.all(['test', 'src'].map((dir) => findTests(path.join(root, dir)))))
  .flat()
  .map((file) => path.relative(root, file))
  .filter((file) => filters.length === 0 || filters.some((filter) => file.includes(filter)))
  .sort();
if (files.length === 0) {
  console.error(`run-tests: no test files match ${filters.join(' ') || '**/*.test.ts'}`);
  process.exit(1);
}

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-test-pg-'));
const tapFile = path.join(dataDir, 'report.tap');
let code = 1;
let summary = '';
try {
  // As root the server runs as the postgres user, which must enter this directory.
  await chmod(dataDir, 0o755);
  const pgLog = [];
  const postgres = await startEmbeddedPostgres({ dataDir, log: (line) => pgLog.push(line) }).catch((err) => {
    console.error(pgLog.slice(-30).join('\n'));
    throw err;
  });
  try {
    const adminUrl = new URL(postgres.url);
    adminUrl.pathname = '/postgres';
    code = await runNodeTests(files, { ...process.env, JETCRON_TEST_PG_URL: adminUrl.href });
    summary = await readFile(tapFile, 'utf8').catch(() => '');
  } finally {
    await postgres.stop();
  }
} catch (err) {
  console.error(`run-tests: ${err instanceof Error ? err.stack : err}`);
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
// The spec reporter's summary uses symbols; end with the TAP form (`# tests N`, `# pass N`, `# fail N`).
const tapSummary = summary.split('\n').filter((line) => /^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) /.test(line));
if (tapSummary.length > 0) console.log(tapSummary.join('\n'));
process.exit(code);

async function findTests(dir) {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const found = await Promise.all(
    entries.map(async (entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : findTests(full);
      return entry.name.endsWith('.test.ts') ? [full] : [];
    }),
  );
  return found.flat();
}

function runNodeTests(testFiles, env) {
  const reporters = ['--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=tap', `--test-reporter-destination=${tapFile}`];
  // A test that hangs fails after 5 minutes, naming itself, rather than holding the run
  // until CI's own limit; the longest test takes about a minute, and a test may set its own.
  // Three files at once on two cores: most of a file's time is waiting (leases, takeovers,
  // retries at a time scale), and every verdict holds on a busy machine.
  const nodeArgs = ['--test', '--test-concurrency=3', '--test-timeout=300000', ...reporters, ...runnerFlags, ...testFiles];
  const child = spawn(process.execPath, nodeArgs, { cwd: root, stdio: 'inherit', env });
  const forward = (signal) => child.kill(signal);
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, forward);
  return new Promise((resolve) => {
    child.on('error', (err) => {
      console.error(`run-tests: ${err.message}`);
      resolve(1);
    });
    child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 + (os.constants.signals[signal] ?? 1) : 1)));
  });
}
