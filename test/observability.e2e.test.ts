import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createOrgWithKey, spawnJetcron, type JetcronProcess } from './support/jetcron-process.ts';
import { startTestNats } from './support/nats.ts';
import { createTestDatabase } from './support/postgres.ts';
import { apiClient, eventually, type Api } from './support/service.ts';
import { startTarget } from './support/target.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  service: string;
}

/** An OTLP/HTTP (JSON) trace receiver: what the standard exporter sends to `<endpoint>/v1/traces`. */
async function startOtlpReceiver() {
  const spans: OtlpSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: any[] };
        for (const rs of body.resourceSpans ?? []) {
          const service = rs.resource?.attributes?.find((a: any) => a.key === 'service.name')?.value?.stringValue;
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              const attributes: Record<string, unknown> = {};
              for (const a of s.attributes ?? []) attributes[a.key] = a.value.stringValue ?? (a.value.intValue !== undefined ? Number(a.value.intValue) : a.value.boolValue ?? a.value.doubleValue);
              spans.push({ traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || undefined, name: s.name, kind: s.kind, attributes, service });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    trace: (traceId: string) => spans.filter((s) => s.traceId === traceId),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const traceIdOf = (traceparent: unknown) => /^00-([0-9a-f]{32})-[0-9a-f]{16}-0[01]$/.exec(String(traceparent))?.[1];
const SECRET_HEADER = 'Bearer sk-live-do-not-log-7f3a9c';
const ENDPOINT_SECRET = 'whsec-endpoint-never-in-logs-51d2';

describe('traces, structured logs', () => {
  let nats: Awaited<ReturnType<typeof startTestNats>>;
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let svc: JetcronProcess;
  let api: Api;
  let apiKey: string;
  let webhookSecret: string;

  before(async () => {
    [nats, db, otlp, target] = await Promise.all([startTestNats(), createTestDatabase(), startOtlpReceiver(), startTarget()]);
    svc = await spawnJetcron({
      roles: 'api,projector,scheduler,dispatcher,notifier', natsUrl: nats.url, databaseUrl: db.url, label: 'traced',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: 'jetcron-test', LOG_LEVEL: 'debug' },
    });
    const org = await createOrgWithKey(nats.url, 'pro');
    apiKey = org.apiKey;
    webhookSecret = org.webhookSecret;
    api = apiClient(() => svc.url!, apiKey);
  });
  after(async () => {
    await svc?.cleanup();
    await Promise.all([target?.close(), otlp?.close()]);
    await db?.drop();
    await nats?.stop();
  });

  /** The trace's spans once those named are all exported; asserts they form one tree. */
  async function connectedTrace(traceId: string, names: string[]) {
    const spans = await eventually(async () => {
      const got = otlp.trace(traceId);
      return names.every((n) => got.some((s) => s.name === n)) && got;
    }, 20_000, 100).catch(() => {
      throw new Error(`trace ${traceId}: wanted ${names.join(', ')}; got ${otlp.trace(traceId).map((s) => s.name).join(', ')}`);
    });
    const ids = new Set(spans.map((s) => s.spanId));
    const roots = spans.filter((s) => !s.parentSpanId || !ids.has(s.parentSpanId));
    assert.equal(roots.length, 1, `one root, got ${roots.map((r) => r.name).join(', ')}`);
    assert.ok(spans.every((s) => s.service === 'jetcron-test'));
    return spans;
  }

  test('a task: API request → append → translator → attempt → outbound request (traceparent sent) → result → projector, one trace', async () => {
    const callerTrace = 'aabbccddeeff00112233445566778899';
    const res = await api('POST', '/tasks', { url: `${target.url}/traced-task`, headers: { Authorization: SECRET_HEADER } }, { traceparent: `00-${callerTrace}-1122334455667788-01` });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const arrived = await eventually(async () => target.received.find((r) => r.path === '/traced-task'));
    // The caller's trace goes on through the log to the target.
    assert.equal(traceIdOf(arrived.headers.traceparent), callerTrace);
    // No translator stands between the create and the attempt: the owner reads the log.
    const spans = await connectedTrace(callerTrace, [
      'POST /api/v1/tasks', 'append TaskCreated', 'attempt task', 'POST', 'append AttemptFinished', 'project TaskCreated', 'project AttemptFinished',
    ]);
    const byName = (n: string) => spans.find((s) => s.name === n)!;
    assert.equal(byName('POST /api/v1/tasks').kind, 2, 'SERVER');
    assert.equal(byName('POST /api/v1/tasks').attributes['http.response.status_code'], 201);
    assert.equal(byName('POST /api/v1/tasks').parentSpanId, '1122334455667788', 'a child of the caller\'s span');
    const attempt = byName('attempt task');
    assert.equal(attempt.attributes['jetcron.execution_id'], res.body.data.last_execution_id);
    assert.equal(attempt.attributes['jetcron.task_id'], res.body.data.id);
    assert.equal(attempt.attributes['jetcron.org_id'], res.body.data.org_id ?? attempt.attributes['jetcron.org_id']);
    const client = byName('POST');
    assert.equal(client.kind, 3, 'CLIENT');
    assert.equal(client.parentSpanId, attempt.spanId);
    assert.equal(client.attributes['http.response.status_code'], 200);
    assert.equal(client.attributes['url.full'], `${target.url}/traced-task`);
    // The target saw the client span as its parent.
    assert.equal(String(arrived.headers.traceparent).split('-')[2], client.spanId);
  });

  test('a schedule tick starts a trace of its own, through to the target', async () => {
    const res = await api('POST', '/schedules', { url: `${target.url}/traced-tick`, cron: '* * * * * *' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const arrived = await eventually(async () => target.received.find((r) => r.path === '/traced-tick'), 15_000);
    await api('DELETE', `/schedules/${res.body.data.id}`);
    const traceId = traceIdOf(arrived.headers.traceparent);
    assert.ok(traceId, 'the tick\'s request carries traceparent');
    const spans = await connectedTrace(traceId!, ['schedule tick', 'append ScheduleTicked', 'attempt schedule', 'GET', 'append AttemptFinished', 'project AttemptFinished']);
    assert.equal(spans.find((s) => s.name === 'schedule tick')!.attributes['jetcron.schedule_id'], res.body.data.id);
    assert.ok(!spans.some((s) => s.name === 'POST /api/v1/schedules'), 'the tick is not in the create request\'s trace');
  });

  test('an inbound request: receive → route → forward, one trace', async () => {
    const ep = await api('POST', '/endpoints', { name: 'traced', forward_urls: [`${target.url}/traced-forward`], secrets: { signing: ENDPOINT_SECRET } });
    assert.equal(ep.status, 201, JSON.stringify(ep.body));
    const sent = await fetch(ep.body.data.inbound_url, { method: 'POST', body: '{"hello":1}', headers: { 'content-type': 'application/json' } });
    const { id } = (await sent.json()) as { id: string };
    const arrived = await eventually(async () => target.received.find((r) => r.path === '/traced-forward'));
    const traceId = traceIdOf(arrived.headers.traceparent)!;
    const spans = await connectedTrace(traceId, ['POST /in/{slug}', 'route inbound', 'append InboundEventReceived', 'attempt endpoint', 'POST', 'append AttemptFinished']);
    assert.equal(spans.find((s) => s.name === 'POST /in/{slug}')!.attributes['jetcron.endpoint_id'], ep.body.data.id);
    assert.equal(spans.find((s) => s.name === 'route inbound')!.attributes['jetcron.inbound_event_id'], id);
  });

  test('a failure notification continues the failed task\'s trace, to the organization webhook', async () => {
    const settings = await api('PUT', '/organization', { notification_webhook_url: `${target.url}/traced-notify`, notify_on_failure: true });
    assert.equal(settings.status, 200, JSON.stringify(settings.body));
    target.setResponder((r) => (r.path === '/traced-fail' ? { status: 500, body: 'down' } : { status: 200, body: 'ok' }));
    try {
      const res = await api('POST', '/tasks', { url: `${target.url}/traced-fail`, retry_attempts: 0 });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const failed = await eventually(async () => target.received.find((r) => r.path === '/traced-fail'));
      const notified = await eventually(async () => target.received.find((r) => r.path === '/traced-notify'), 15_000);
      const traceId = traceIdOf(failed.headers.traceparent)!;
      assert.equal(traceIdOf(notified.headers.traceparent), traceId, 'the webhook call is in the task\'s trace');
      await connectedTrace(traceId, ['POST /api/v1/tasks', 'attempt task', 'append AttemptFinished', 'notify-decide AttemptFinished', 'notify task.failed']);
    } finally {
      target.setResponder(() => ({ status: 200, body: 'ok' }));
    }
  });

  test('log lines are JSON with level, time, role and the ids; no secret appears in them', async () => {
    const lines = svc.lines.map((l) => l.replace(/^\[[^\]]*\] /, '')).filter((l) => l.startsWith('{'));
    assert.ok(lines.length > 10, `${lines.length} JSON lines`);
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const p of parsed) {
      assert.equal(typeof p.level, 'string');
      assert.ok(!Number.isNaN(Date.parse(String(p.time))));
      assert.equal(p.role, 'api,projector,scheduler,dispatcher,notifier');
    }
    const attempts = parsed.filter((p) => p.msg === 'attempt finished');
    assert.ok(attempts.some((p) => typeof p.execution_id === 'string' && typeof p.task_id === 'string' && typeof p.org_id === 'string' && p.attempt === 1));
    assert.ok(attempts.some((p) => typeof p.endpoint_id === 'string'));
    assert.ok(parsed.some((p) => p.msg === 'inbound event routed' && typeof p.inbound_event_id === 'string'));
    assert.ok(parsed.some((p) => p.msg === 'request' && p.route === '/api/v1/tasks' && p.status === 201));
    // Traced lines carry their trace.
    assert.ok(attempts.some((p) => typeof p.trace_id === 'string'));
    const all = svc.lines.join('\n');
    for (const secret of [SECRET_HEADER, 'sk-live-do-not-log', ENDPOINT_SECRET, apiKey, apiKey.split('.')[1]!, webhookSecret]) {
      assert.ok(!all.includes(secret), `a log line holds a secret (${secret.slice(0, 6)}…)`);
    }
  });
});
