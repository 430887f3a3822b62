import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OwnedTasks } from '../src/commands/partition/owned-tasks.ts';
import { endpointPartition } from '../src/commands/partition/partition-of.ts';
import type { Endpoint, EndpointEvent } from '../src/commands/endpoint/types.ts';
import { ENDPOINT_DEFAULTS } from '../src/commands/endpoint/types.ts';
import type { InboundEventEvent } from '../src/commands/inbound-event/types.ts';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import type { AttemptJob } from '../src/commands/execution/job.ts';

// Specs of a partition owner's endpoint deliveries: given what the log says, what starts.
const P = 4;
const T0 = Date.parse('2026-11-25T12:00:00Z');
const at = (ms = 0) => new Date(T0 + ms).toISOString();
let n = 0;

function endpoint(over: Partial<Endpoint> = {}): Endpoint {
  return {
    ...ENDPOINT_DEFAULTS, name: 'hooks', id: 'ep_1', org_id: 'org_a', slug: 'ep_x', paused: false, secret_names: [], sealed_secrets: null,
    created_at: at(), updated_at: at(), forward_urls: ['https://example.com/f'], ...over,
  };
}

const endpointEvent = (type: EndpointEvent['type'], e: Endpoint): EndpointEvent =>
  ({ type, id: `evt_e${n++}`, at: at(), org_id: e.org_id, data: { endpoint: e } }) as EndpointEvent;

function received(e: Endpoint, opts: { executions?: number; replaces?: string; scheduledFor?: string; body?: string } = {}): InboundEventEvent {
  const id = `evt_i${n++}`;
  const executions = Array.from({ length: opts.executions ?? 1 }, (_, i) => ({
    execution_id: opts.replaces ?? `exe_${id}_${i}`, url: `https://example.com/f${i}`, method: null, headers: null, body: opts.body ?? null,
    scheduled_for: opts.scheduledFor ?? at(), ...(opts.replaces ? { replaces: true as const } : {}),
  }));
  return {
    type: 'InboundEventReceived', id, at: at(), org_id: e.org_id,
    data: {
      event: { id, endpoint_id: e.id, method: 'POST', path: '/in/x', query: '', source_ip: null, received_at: at(), body_size: 1, inbound_seq: n, outcome: 'forwarding' },
      endpoint: { id: e.id, name: e.name, use_lane: e.use_lane, retry_attempts: e.retry_attempts },
      executions,
    },
  };
}

function finished(job: AttemptJob, retryAt?: number): ExecutionEvent {
  return {
    type: 'AttemptFinished', id: `${job.execution_id}.${job.attempt}.finished`, at: at(), org_id: job.org_id,
    data: {
      execution_id: job.execution_id, source: job.source, attempt: job.attempt, status: retryAt ? 'failed' : 'success', status_code: retryAt ? 500 : 200,
      error_message: null, scheduled_for: job.scheduled_for, started_at: at(), finished_at: at(), duration_ms: 1,
      request: { method: 'POST', url: job.request.url, headers: {}, body: null }, response_body: null, response_truncated: false,
      response_headers: null, script_logs: [], next_attempt_at: retryAt ? at(retryAt) : null, final: !retryAt, callback_url: null, push_callback_url: null, lane: job.lane,
    },
  };
}

const owner = (e: Endpoint) => new OwnedTasks(endpointPartition(e.org_id, e.id, P), P);
const ids = (xs: Array<{ id: string }>) => xs.map((x) => x.id);
/** A cancellation's reason (`ExecutionCancelled`). */
const reasonOf = (e: { data: object }) => (e.data as { reason?: string }).reason;
const deliveryIds = (ev: InboundEventEvent) => ev.data.executions.map((x) => x.execution_id);

test('a lane endpoint forwards one at a time in arrival order; one with use_lane false all at once', () => {
  const laned = endpoint();
  const s = owner(laned);
  s.onEndpointEvent(endpointEvent('EndpointCreated', laned), 1);
  const evs = [received(laned), received(laned), received(laned)];
  evs.forEach((ev, i) => s.onInboundEvent(ev, 2 + i, 0));
  const [first] = s.take(T0);
  assert.equal(first!.id, deliveryIds(evs[0]!)[0]);
  assert.deepEqual(s.take(T0), []);
  s.onResult(finished(first!.job));
  assert.deepEqual(ids(s.take(T0)), deliveryIds(evs[1]!));

  const open = endpoint({ id: 'ep_2', use_lane: false });
  const t = owner(open);
  t.onEndpointEvent(endpointEvent('EndpointCreated', open), 1);
  const more = [received(open, { executions: 2 }), received(open)];
  more.forEach((ev, i) => t.onInboundEvent(ev, 2 + i, 0));
  assert.deepEqual(ids(t.take(T0)), more.flatMap(deliveryIds));
});

test('a delivery after the endpoint\'s key went idle (dropped with its limits) is taken at once, laned or not', () => {
  for (const use_lane of [false, true]) {
    const e = endpoint({ id: `ep_idle_${use_lane}`, use_lane });
    const s = owner(e);
    s.onEndpointEvent(endpointEvent('EndpointCreated', e), 1);
    const first = received(e);
    s.onInboundEvent(first, 2, 0);
    const [sent] = s.take(T0);
    s.onResult(finished(sent!.job));
    assert.deepEqual(s.take(T0), [], 'nothing waits: the key is idle and dropped');
    const next = received(e);
    s.onInboundEvent(next, 3, 0);
    assert.deepEqual(ids(s.take(T0)), deliveryIds(next), `use_lane ${use_lane}`);
  }
});

test('paused: deliveries wait, in order; a resume sends them; a delete cancels what waits', () => {
  const e = endpoint();
  const s = owner(e);
  s.onEndpointEvent(endpointEvent('EndpointCreated', e), 1);
  s.onEndpointEvent(endpointEvent('EndpointPaused', { ...e, paused: true }), 2);
  const evs = [received(e), received(e)];
  evs.forEach((ev, i) => s.onInboundEvent(ev, 3 + i, 0));
  assert.deepEqual(s.take(T0 + 60_000), []);
  assert.deepEqual(s.endpointLoads('org_a'), [{ key: 'ep_1', waiting: 2, in_flight: 0, paused: true }]);
  s.onEndpointEvent(endpointEvent('EndpointResumed', e), 5);
  const [first] = s.take(T0);
  assert.equal(first!.id, deliveryIds(evs[0]!)[0]);
  s.onEndpointEvent(endpointEvent('EndpointDeleted', e), 6);
  const cancels = s.takeCancels();
  assert.deepEqual(cancels.map((c) => c.data.execution_id), deliveryIds(evs[1]!));
  assert.equal(s.sourceGone(first!), true, 'the one being sent ends without a retry');
  const late = received(e);
  s.onInboundEvent(late, 7, 0);
  assert.deepEqual(ids(s.take(T0 + 60_000)), [], 'a delivery of a deleted endpoint is never sent');
  assert.deepEqual(s.takeCancels().map((c) => [c.data.execution_id, reasonOf(c)]), deliveryIds(late).map((id) => [id, 'endpoint deleted']), 'its cancellation is recorded');
});

test('a retry is rebuilt from the event that planned it; a debounce replacement takes the waiting one\'s place', () => {
  const e = endpoint({ use_lane: false, retry_attempts: 2 });
  const s = owner(e);
  s.onEndpointEvent(endpointEvent('EndpointCreated', e), 1);
  const window = received(e, { scheduledFor: at(30_000), body: 'first' });
  s.onInboundEvent(window, 2, 0);
  const id = deliveryIds(window)[0]!;
  s.onInboundEvent(received(e, { replaces: id, scheduledFor: at(30_000), body: 'second' }), 3, 0);
  assert.equal(s.get(id)!.job.inbound!.body, 'second');
  assert.deepEqual(s.take(T0 + 29_999), []);
  const [run] = s.take(T0 + 30_000);
  s.onResult(finished(run!.job, 45_000));
  const [retry] = s.take(T0 + 45_000);
  assert.equal(retry!.job.attempt, 2);
  assert.equal(retry!.job.inbound!.body, 'second');
  assert.equal(retry!.job.request.url, 'https://example.com/f0');
});

test('a takeover that learns the endpoint as it is now keeps that state against the older events it reads after', () => {
  const e = endpoint();
  const s = owner(e);
  const ev = received(e);
  assert.equal(s.needsEndpoint(ev), true);
  // Now: paused at seq 50. The log read from seq 10 holds a resume at 20.
  s.learnEndpoint('org_a', e.id, { ...e, paused: true }, 50, T0);
  s.onInboundEvent(ev, 10, 0);
  s.onEndpointEvent(endpointEvent('EndpointResumed', e), 20);
  assert.deepEqual(s.take(T0), [], 'still paused: the resume is older than the state learnt');
  s.onEndpointEvent(endpointEvent('EndpointResumed', e), 60);
  assert.equal(s.take(T0).length, 1);
});

test('an endpoint with a rate and a lane: one at a time, and no more starts than the rate in a window', () => {
  const e = endpoint({ flow_control: { parallelism: null, rate: 2, period: '1s' } });
  const s = owner(e);
  s.onEndpointEvent(endpointEvent('EndpointCreated', e), 1);
  for (let i = 0; i < 4; i++) s.onInboundEvent(received(e), 2 + i, 0);
  const starts: number[] = [];
  for (let t = 0; t < 3000; t += 10) {
    for (const exec of s.take(T0 + t)) {
      starts.push(t);
      s.began(exec, T0 + t);
      s.onResult(finished(exec.job));
    }
  }
  assert.equal(starts.length, 4);
  for (let i = 0; i + 2 < starts.length; i++) assert.ok(starts[i + 2]! - starts[i]! >= 1000, starts.join(','));
});
