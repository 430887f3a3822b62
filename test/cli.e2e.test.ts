import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { apiClient, eventually, startTestService, type TestService } from './support/service.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe('admin CLI', () => {
  let svc: TestService;
  let dataDir: string;
  let acme: { org_id: string; api_key: string; webhook_secret: string };
  let second: { api_key: string };

  // The real bin, as `npx jetcron` runs it, against the test service's nats-server.
  const cli = (...args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, ['bin/jetcron.mjs', ...args, '--data-dir', dataDir], {
        cwd: root,
        env: { PATH: process.env.PATH, NATS_URL: svc.natsUrl },
        timeout: 60_000,
      }, (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
    });
  const json = (run: Run) => {
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, run.stdout);
    return JSON.parse(lines[0]!);
  };
  const api = (key: string) => apiClient(() => svc.url, key);

  before(async () => {
    svc = await startTestService();
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-cli-'));
    acme = json(await cli('org', 'create', '--name', 'acme', '--plan', 'pro'));
  });
  after(async () => {
    await svc?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test('org create prints one JSON line whose key works against the service', async () => {
    assert.deepEqual(Object.keys(acme).sort(), ['api_key', 'org_id', 'webhook_secret']);
    assert.match(acme.org_id, /^org_/);
    assert.match(acme.api_key, /^pk_[0-9a-z]+\.sk_[0-9a-z]+$/);
    assert.match(acme.webhook_secret, /^whsec_/);
    const res = await api(acme.api_key)('GET', '/organization');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.id, acme.org_id);
    assert.equal(res.body.data.name, 'acme');
    assert.equal(res.body.data.plan, 'pro');
    assert.equal(res.body.data.webhook_secret, acme.webhook_secret);
    // Pro: a Lua script is allowed.
    const task = await api(acme.api_key)('POST', '/tasks', { url: 'http://127.0.0.1:9/x', script: 'function on_response(res, task) end', enabled: false });
    assert.equal(task.status, 201, JSON.stringify(task.body));
  });

  test('key create prints a second key that works', async () => {
    second = json(await cli('key', 'create', '--org', acme.org_id));
    assert.deepEqual(Object.keys(second), ['api_key']);
    assert.notEqual(second.api_key, acme.api_key);
    const res = await api(second.api_key)('GET', '/organization');
    assert.equal(res.status, 200);
    assert.equal(res.body.data.id, acme.org_id);
  });

  test('ids that are not ids are refused, never matched as NATS wildcards', async () => {
    const runs = await Promise.all([
      cli('org', 'plan', '--org', '*', '--plan', 'free'),
      cli('key', 'create', '--org', '*'),
      cli('key', 'revoke', '--key', '*'),
    ]);
    for (const run of runs) {
      assert.equal(run.code, 1, `${run.stdout} ${run.stderr}`);
      assert.match(run.stderr, /^jetcron: .*not found/);
      assert.equal(run.stdout, '');
    }
    // The newest organization and key, which a wildcard would have hit, are untouched.
    const res = await api(second.api_key)('GET', '/organization');
    assert.equal(res.status, 200);
    assert.equal(res.body.data.plan, 'pro');
  });

  test('org plan changes the plan', async () => {
    assert.deepEqual(json(await cli('org', 'plan', '--org', acme.org_id, '--plan', 'free')), { org_id: acme.org_id, plan: 'free' });
    const key = api(acme.api_key);
    await eventually(async () => (await key('GET', '/organization')).body.data.plan === 'free', 30_000);
    const script = await key('POST', '/tasks', { url: 'http://127.0.0.1:9/x', script: 'x = 1' });
    assert.equal(script.status, 403);
    assert.equal(script.body.error.field, 'script');
  });

  test('key revoke takes the full key; that key then gets 401, the other still works', async () => {
    const run = await cli('key', 'revoke', '--key', second.api_key);
    assert.equal(run.code, 0, run.stderr);
    await eventually(async () => (await api(second.api_key)('GET', '/organization')).status === 401, 30_000);
    assert.equal((await api(acme.api_key)('GET', '/organization')).status, 200);
  });

  test('help, -h and --help print the usage on stdout and exit 0; --version prints the package\'s version', async () => {
    const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
    const [help, short, long, after, ver] = await Promise.all([cli('help'), cli('-h'), cli('--help'), cli('org', 'create', '--help'), cli('--version')]);
    for (const run of [help, short, long, after]) {
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /^usage:\n/);
      assert.match(run.stdout, /jetcron org create --name NAME/);
      assert.equal(run.stderr, '');
    }
    assert.deepEqual([ver.code, ver.stdout, ver.stderr], [0, `${version}\n`, '']);
  });

  test('bad usage exits 2 with a message', async () => {
    const runs = await Promise.all([
      cli(),
      cli('org', 'create'),
      cli('org', 'plan', '--org', acme.org_id, '--plan', 'gold'),
    ]);
    for (const run of runs) {
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /^jetcron: .+/);
      assert.match(run.stderr, /usage:/);
      assert.equal(run.stdout, '');
    }
    assert.match(runs[1]!.stderr, /--name/);
    assert.match(runs[2]!.stderr, /--plan/);
    assert.equal((await api(acme.api_key)('GET', '/organization')).body.data.plan, 'free');
  });

  test('an unknown organization exits 1 with a message', async () => {
    const runs = await Promise.all([
      cli('org', 'plan', '--org', 'org_00000000000000000000', '--plan', 'pro'),
      cli('key', 'create', '--org', 'org_00000000000000000000'),
    ]);
    for (const run of runs) {
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /^jetcron: .*not found/i);
      assert.equal(run.stdout, '');
    }
  });
});
