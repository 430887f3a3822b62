import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, STREAMS } from '../streams/definitions.ts';
import { ALL_ROLES } from '../src/config.ts';
import type { StatusReport } from '../src/cli/status.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { readCheckpoint } from '../src/projections/projector.ts';
import { sql } from 'kysely';
import { onChildLines } from './support/child-lines.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';

const root = path.resolve(import.meta.dirname, '..');
const PARTITIONS = 8;
const SUMMARY = (label: string) => new RegExp(`^${label}: [\\d,]+ events in \\d+\\.\\d s \\([\\d,]+/s\\)`, 'm');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe('jetcron status, and the progress of rebuild and replay', () => {
  let svc: TestService;
  let api: Api;
  let nats: Nats;
  let db: Db;
  let dataDir: string;

  // The real bin against the test service; an empty data dir, so only the env says where things are.
  const cli = (args: string[], env: Record<string, string | undefined> = {}): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, ['bin/jetcron.mjs', ...args, '--data-dir', dataDir], {
        cwd: root,
        env: { PATH: process.env.PATH, NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, ...env },
        timeout: 60_000,
      }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
    });
  const statusJson = async (env: Record<string, string | undefined> = {}, expectCode = 0): Promise<StatusReport> => {
    const run = await cli(['status', '--json'], env);
    assert.equal(run.code, expectCode, run.stderr + run.stdout);
    const lines = run.stdout.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, run.stdout);
    return JSON.parse(lines[0]!);
  };
  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg()).api;
    nats = await connectNats(svc.natsUrl, 'status test');
    db = connectDb(svc.databaseUrl).db;
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-status-'));
    const created = await api('POST', '/tasks', { url: 'http://127.0.0.1:9/later', delay: '1h' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    // Every lease of the one process is held: its readers', both kinds of partition owners' and the retry-job worker's.
    const leases = await new Kvm(nats.nc).open(KV_BUCKETS.leases.name);
    await eventually(async () => {
      let n = 0;
      for await (const _ of await leases.keys()) n++;
      return n === 4 + 2 * PARTITIONS;
    });
  });
  after(async () => {
    await nats?.close();
    await db?.destroy();
    await svc?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test('--json against the running service: streams, consumers and their lag, leases, processes', async () => {
    const r = await statusJson();
    assert.deepEqual(Object.keys(r), ['checked_at', 'streams', 'consumers', 'readers', 'projections', 'leases', 'monitors', 'flow_control', 'processes', 'errors']);
    assert.deepEqual(r.errors, []);
    const now = Date.parse(r.checked_at);
    assert.ok(Math.abs(now - Date.now()) < 60_000);

    assert.deepEqual(r.streams.map((s) => s.name), Object.values(STREAMS).map((s) => s.name));
    const events = r.streams.find((s) => s.name === 'EVENTS')!;
    // The organization, its key, the task: the event log keeps every one.
    assert.ok(events.messages >= 3, JSON.stringify(events));
    assert.equal(events.last_seq, events.messages);
    assert.ok(events.bytes > 0);
    assert.ok(Date.parse(events.first_time!) <= now && Date.parse(events.first_time!) > now - 600_000, events.first_time!);
    const notify = r.streams.find((s) => s.name === 'NOTIFY')!;
    assert.deepEqual([notify.messages, notify.first_time, notify.last_seq], [0, null, 0]);

    assert.deepEqual(r.consumers.map((c) => [c.name, c.stream]), [['notifiers', 'NOTIFY']]);
    for (const c of r.consumers) assert.deepEqual([c.num_pending, c.num_ack_pending], [0, 0]);

    assert.deepEqual(r.readers.map((c) => [c.name, c.stream, c.checkpoint_in]), [
      ['projector', 'EVENTS', 'postgres'], ['notifier', 'EVENTS', 'kv'], ['inbound-router', 'INBOUND', 'kv'],
    ]);
    const projector = r.readers[0]!;
    assert.equal(projector.last_seq, events.last_seq);
    assert.ok(projector.position! >= 1 && projector.position! <= events.last_seq);
    assert.equal(projector.lag, events.last_seq - projector.position!);
    assert.equal(r.projections!.find((p) => p.name === 'read_models_v1')?.position, projector.position);

    assert.equal(r.processes.length, 1, JSON.stringify(r.processes));
    const me = r.processes[0]!;
    assert.equal(me.pid, process.pid, 'the test service runs in this process');
    assert.deepEqual([...me.roles].sort(), [...ALL_ROLES].sort());
    assert.equal(me.host, os.hostname());
    assert.equal(me.group, null);
    assert.ok(me.uptime_seconds >= 0 && Date.parse(me.started_at) <= now);

    const names = r.leases.map((l) => l.name);
    const each = (prefix: string) => Array.from({ length: PARTITIONS }, (_, p) => `${prefix}.${p}`);
    assert.deepEqual([...names].sort(), ['projector', 'inbound-router', 'notifier', 'retry-jobs', ...each('owner'), ...each('monitor-owner')].sort());
    for (const l of r.leases) {
      assert.equal(l.holder, me.instance, l.name);
      assert.equal(l.holder_pid, process.pid);
      assert.ok(l.expires_in_seconds > 0 && l.expires_in_seconds <= KV_BUCKETS.leases.ttlMs / 1000, `${l.name} ${l.expires_in_seconds}`);
    }
  });

  test('tables for people: every section with its rows', async () => {
    const run = await cli(['status']);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.split('\n');
    for (const title of ['STREAMS', 'DURABLE CONSUMERS', 'ORDERED READERS', 'PROJECTIONS (Postgres)', 'LEASES', 'MONITORS', 'FLOW CONTROL', 'PROCESSES']) {
      assert.ok(lines.includes(title), `no section ${title} in\n${run.stdout}`);
    }
    assert.ok(!lines.includes('ERRORS'));
    assert.match(run.stdout, /^EVENTS +\d+ +[\d.]+ (B|KiB) +\S+Z \([\dhms]+ ago\) +\d+$/m);
    assert.match(run.stdout, new RegExp(`^notifier +\\S+ +${process.pid} +\\d+\\.\\d s$`, 'm'));
    assert.match(run.stdout, new RegExp(`^\\S+ +${['api', 'projector', 'scheduler', 'dispatcher', 'notifier'].join(',')} +${process.pid} `, 'm'));
    // Columns line up: every row of the streams table starts its numbers where the header's column ends.
    const streamRows = lines.slice(lines.indexOf('STREAMS') + 1, lines.indexOf('STREAMS') + 2 + Object.keys(STREAMS).length);
    const end = streamRows[0]!.indexOf('messages') + 'messages'.length;
    for (const row of streamRows.slice(1)) assert.match(row.slice(0, end), /\d$/, row);
  });

  test('monitors: how many in each status, why the down ones are down, their deadline timers', async () => {
    // None of these arms a timer (new, or down), so the other tests' timer counts hold.
    const made: Array<{ id: string; ping_url: string }> = [];
    for (const name of ['never pinged', 'signalled', 'exited']) made.push((await api('POST', '/monitors', { name, schedule_type: 'interval', interval_seconds: 3600 })).body.data);
    assert.equal((await fetch(`${made[1]!.ping_url}/fail`)).status, 200);
    assert.equal((await fetch(`${made[2]!.ping_url}/3`)).status, 200);
    await eventually(async () => (await api('GET', `/monitors/${made[2]!.id}`)).body.data.status === 'down');
    const r = await statusJson();
    assert.deepEqual(r.monitors, { total: 3, by_status: { new: 1, down: 2 }, down_reasons: { failed: 1, exit_status: 1 }, deadlines_armed: 0, deadlines_overdue: 0 });
    const run = await cli(['status']);
    const lines = run.stdout.split('\n');
    assert.equal(lines[lines.indexOf('MONITORS') + 2]?.replace(/ +/g, ' ').trim(), '3 1 0 2 0 exit_status 1, failed 1 0 0');

    // Its first ping puts the new one up: its monitor owner now holds its deadline.
    assert.equal((await fetch(made[0]!.ping_url)).status, 200);
    await eventually(async () => (await statusJson()).monitors?.deadlines_armed === 1);
  });

  test('NATS unreachable: exit 1 and a message, nothing on stdout', async () => {
    const run = await cli(['status', '--json'], { NATS_URL: 'nats://127.0.0.1:1' });
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /^jetcron: cannot reach NATS at nats:\/\/127\.0\.0\.1:1 .*is the service running\?/);
  });

  test('no Postgres known: what NATS holds is reported, the missing part named, exit 3', async () => {
    const r = await statusJson({ DATABASE_URL: undefined }, 3);
    assert.deepEqual(r.errors.map((e) => e.part), ['projections']);
    assert.match(r.errors[0]!.message, /DATABASE_URL/);
    assert.equal(r.projections, null);
    assert.equal(r.monitors, null);
    assert.equal(r.readers[0]!.position, null);
    assert.equal(r.readers[0]!.lag, null);
    assert.ok(r.streams.find((s) => s.name === 'EVENTS')!.messages >= 3);
    assert.equal(r.processes.length, 1);
  });

  test('service stopped: no process, no lease; rebuild and replay end with a summary line', async () => {
    await svc.stopService();
    const r = await statusJson();
    assert.deepEqual(r.processes, []);
    assert.deepEqual(r.leases, [], 'a clean stop releases every lease');

    const rebuild = await cli(['projections', 'rebuild']);
    assert.equal(rebuild.code, 0, rebuild.stderr);
    const rebuilt = JSON.parse(rebuild.stdout);
    assert.equal(rebuilt.rebuilt, true);
    assert.match(rebuild.stderr, SUMMARY('rebuild'));
    assert.ok(rebuild.stderr.includes(`rebuild: ${rebuilt.events.toLocaleString('en-US')} events in`), rebuild.stderr);
    assert.ok(!rebuild.stderr.includes('\r'), 'not a terminal: no redraws');

    const replay = await cli(['replay', '--projection', 'examples/projections/daily-outcomes.ts']);
    assert.equal(replay.code, 0, replay.stderr);
    const replayed = JSON.parse(replay.stdout);
    assert.match(replay.stderr, SUMMARY('replay daily_outcomes_v1'));
    assert.ok(replay.stderr.includes(`replay daily_outcomes_v1: ${replayed.events.toLocaleString('en-US')} events in`), replay.stderr);

    const after = await statusJson();
    const own = after.projections!.find((p) => p.name === 'daily_outcomes_v1');
    assert.deepEqual([own?.position, own?.lag], [replayed.last_seq, 0]);
    assert.equal(after.readers[0]!.lag, 0, 'the rebuild reached the end of the log');
  });

  test('replay --follow: the progress ends with "caught up, following"; a stop prints the summary', async () => {
    const child = spawn(process.execPath, ['bin/jetcron.mjs', 'replay', '--projection', 'examples/projections/daily-outcomes.ts', '--follow', '--data-dir', dataDir], {
      cwd: root,
      env: { PATH: process.env.PATH, NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    onChildLines(child, (l) => lines.push(l));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await eventually(async () => lines.some((l) => l.endsWith('; caught up, following')), 30_000);
      // Still running: following the log.
      assert.equal(child.exitCode, null);
      // Events appended now are applied live, after the progress has ended.
      await svc.createOrg();
      const last = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
      // An analyst's checkpoint is in its projection's schema (analytics).
      await eventually(async () => Number((await sql<{ seq: string }>`SELECT seq FROM analytics.jetcron_checkpoints WHERE name = 'daily_outcomes_v1'`.execute(db)).rows[0]?.seq) === last, 30_000);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, lines.join('\n'));
    } finally {
      child.kill('SIGKILL');
    }
    assert.equal(lines.filter((l) => l.includes('caught up')).length, 1, lines.join('\n'));
    const caughtUp = lines.findIndex((l) => l.endsWith('caught up, following'));
    assert.match(lines[caughtUp]!, /^replay daily_outcomes_v1: 0 events in \d+\.\d s \(0\/s\); caught up, following$/);
    const summary = lines.findIndex((l, i) => i > caughtUp && SUMMARY('replay daily_outcomes_v1').test(l));
    assert.ok(summary > caughtUp, lines.join('\n'));
    const result = JSON.parse(lines.find((l) => l.startsWith('{'))!);
    assert.equal(result.projection, 'daily_outcomes_v1');
    assert.ok(result.events >= 2, 'the new organization and its key');
    assert.match(lines[summary]!, new RegExp(`^replay daily_outcomes_v1: ${result.events} events in `));
  });
});
