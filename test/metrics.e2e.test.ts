import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FAILURES_BEFORE_BLOCK } from '../src/commands/host-block/rules.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { parsePrometheusText, sampleValue, type Family } from './support/prometheus-text.ts';
import { startTarget } from './support/target.ts';

// GET /metrics of a service running every role in one process, read with a strict
// Prometheus text reader: the families an operator expects, with their types, and
// counts that follow what the service did.

const SCRIPT = 'function on_response(res, task) log("answered " .. tostring(res.status)) end';

describe('/metrics', () => {
  let svc: TestService;
  let api: Api;
  let target: Awaited<ReturnType<typeof startTarget>>;
  const scrape = async (): Promise<Map<string, Family>> => {
    const res = await fetch(`${svc.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return parsePrometheusText(await res.text());
  };
  const failingTask = async (body: Record<string, unknown> = {}) => {
    const created = await api('POST', '/tasks', { url: `${target.url}/task`, retry_attempts: 0, ...body });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const exe = created.body.data.last_execution_id as string;
    await eventually(async () => (await api('GET', `/executions/${exe}`)).body.data?.status === 'failed', 20_000);
  };

  before(async () => {
    svc = await startTestService();
    target = await startTarget((req) => (req.path === '/task' ? { status: 500, body: 'down' } : { status: 200, body: 'ok' }));
    ({ api } = await svc.createOrg('pro'));
    assert.equal((await api('PUT', '/organization', { notification_webhook_url: `${target.url}/hook` })).status, 200);
  });
  after(async () => {
    await svc?.stop();
    await target?.close();
  });

  test('after one task ran: every family with its type, and the task counted once in each', async () => {
    await failingTask({ script: SCRIPT });
    // The notification is counted once the deliverer has recorded it, a moment after the target saw it.
    const f = await eventually(async () => {
      const families = await scrape();
      return sampleValue(families, 'jetcron_notifications_total', { channel: 'org_webhook', result: 'sent' }) === 1 && families;
    }, 20_000);

    const types: Record<string, string> = {
      // prom-client's process metrics
      jetcron_process_cpu_user_seconds_total: 'counter',
      jetcron_process_resident_memory_bytes: 'gauge',
      jetcron_nodejs_eventloop_lag_seconds: 'gauge',
      jetcron_nodejs_heap_size_used_bytes: 'gauge',
      jetcron_nodejs_gc_duration_seconds: 'histogram',
      // the service's
      jetcron_http_requests_total: 'counter',
      jetcron_http_request_duration_seconds: 'histogram',
      jetcron_executions_total: 'counter',
      jetcron_attempt_duration_seconds: 'histogram',
      jetcron_consumer_lag: 'gauge',
      jetcron_consumer_stuck: 'gauge',
      jetcron_consumer_errors_total: 'counter',
      jetcron_timers_pending: 'gauge',
      jetcron_host_blocks_active: 'gauge',
      jetcron_notifications_total: 'counter',
      jetcron_script_calls_total: 'counter',
      jetcron_script_call_duration_seconds: 'histogram',
      jetcron_projection_seq: 'gauge',
      jetcron_monitor_run_duration_seconds: 'histogram',
    };
    for (const [name, type] of Object.entries(types)) assert.equal(f.get(name)?.type, type, name);

    assert.equal(sampleValue(f, 'jetcron_executions_total', { source_type: 'task', status: 'failed' }), 1);
    assert.equal(sampleValue(f, 'jetcron_executions_total', { source_type: 'task', status: 'success' }), undefined);
    assert.equal(sampleValue(f, 'jetcron_attempt_duration_seconds_count', { source_type: 'task', outcome: 'failed' }), 1);
    // Saving the task checked its script; the attempt ran its on_response.
    assert.equal(sampleValue(f, 'jetcron_script_calls_total', { hook: 'check', result: 'ok' }), 1);
    assert.equal(sampleValue(f, 'jetcron_script_calls_total', { hook: 'on_response', result: 'ok' }), 1);
    assert.equal(sampleValue(f, 'jetcron_script_call_duration_seconds_count', { hook: 'on_response' }), 1);
    assert.equal(sampleValue(f, 'jetcron_http_request_duration_seconds_count', { method: 'POST', route: '/tasks', status: '201' }), 1);
    assert.equal(sampleValue(f, 'jetcron_http_requests_total', { method: 'POST', route: '/tasks', status: '201' }), 1);
    // One failure does not block a host.
    assert.equal(sampleValue(f, 'jetcron_host_blocks_active'), 0);
    assert.ok((sampleValue(f, 'jetcron_process_cpu_user_seconds_total') ?? 0) > 0);

    // Every consumer of the service, each caught up once the task's events are read.
    const consumers = ['projector', 'notifier', 'inbound-router', 'notifiers'];
    await eventually(async () => {
      const now = await scrape();
      return consumers.every((consumer) => sampleValue(now, 'jetcron_consumer_lag', { consumer }) === 0);
    }, 10_000).catch(async (err: Error) => {
      const lag = (await scrape()).get('jetcron_consumer_lag')?.samples;
      assert.fail(`${err.message}: ${JSON.stringify(lag)}`);
    });
  });

  test('the timer and host-block gauges follow what the service holds', async () => {
    const delayed = await api('POST', '/tasks', { url: `${target.url}/later`, delay: '1h' });
    assert.equal(delayed.status, 201);
    await eventually(async () => sampleValue(await scrape(), 'jetcron_timers_pending') === 1);

    // The failures in a row that block the host (the first test's task was one).
    for (let i = 1; i < FAILURES_BEFORE_BLOCK; i++) await failingTask();
    const f = await eventually(async () => {
      const families = await scrape();
      return sampleValue(families, 'jetcron_host_blocks_active') === 1 && families;
    });
    assert.equal(sampleValue(f, 'jetcron_executions_total', { source_type: 'task', status: 'failed' }), FAILURES_BEFORE_BLOCK);
    assert.equal(sampleValue(f, 'jetcron_timers_pending'), 1);
  });

  test('flow control: what waits and runs under keys, and the paused keys, per organization', async () => {
    const { api: org, orgId } = await svc.createOrg();
    assert.equal((await org('POST', '/flow-control/metered/pause')).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await org('POST', '/tasks', { url: `${target.url}/metered/${i}`, flow_control: { key: 'metered', parallelism: 1 } })).status, 201);
    const f = await eventually(async () => {
      const families = await scrape();
      return sampleValue(families, 'jetcron_flow_control_waiting', { org_id: orgId }) === 3 && families;
    });
    assert.equal(f.get('jetcron_flow_control_waiting')?.type, 'gauge');
    assert.equal(sampleValue(f, 'jetcron_flow_control_in_flight', { org_id: orgId }), 0);
    assert.equal(sampleValue(f, 'jetcron_flow_control_paused_keys', { org_id: orgId }), 1);
    assert.equal((await org('POST', '/flow-control/metered/resume')).status, 200);
    await eventually(async () => sampleValue(await scrape(), 'jetcron_flow_control_waiting', { org_id: orgId }) === undefined);
  });

  test('heartbeat runs: their durations in a histogram per organization, by how they ended', async () => {
    const orgs = [await svc.createOrg(), await svc.createOrg()];
    const urls = [];
    for (const { api: org } of orgs) {
      urls.push((await org('POST', '/monitors', { name: 'job', schedule_type: 'interval', interval_seconds: 3600 })).body.data.ping_url as string);
    }
    for (const [i, url] of urls.entries()) {
      for (let run = 0; run <= i; run++) {
        await fetch(`${url}/start`, { method: 'POST' });
        await fetch(`${url}/${run === 1 ? 1 : 0}`, { method: 'POST' });
      }
    }
    await fetch(`${urls[0]}/0`); // an end with no open start: no duration
    const f = await scrape();
    const count = (org: number, outcome: string) => sampleValue(f, 'jetcron_monitor_run_duration_seconds_count', { org_id: orgs[org]!.orgId, outcome });
    assert.deepEqual([count(0, 'success'), count(0, 'failure'), count(1, 'success'), count(1, 'failure')], [1, undefined, 1, 1]);
    assert.equal(sampleValue(f, 'jetcron_monitor_run_duration_seconds_bucket', { org_id: orgs[1]!.orgId, outcome: 'failure', le: '+Inf' }), 1);
  });
});
