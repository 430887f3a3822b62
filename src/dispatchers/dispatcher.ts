import type { JsMsg } from '@nats-io/jetstream';
import { CONSUMERS, SUBJECTS } from '../../streams/definitions.ts';
import type { AttemptResult, ExecutionEvent } from '../commands/execution/types.ts';
import { applyScriptVerdict, attemptStarted, decideAttemptResult, executionSoFar, planAttempt } from '../commands/execution/decide.ts';
import type { ScriptEngine } from '../scripts/engine.ts';
import { unreachable } from '../lib/unreachable.ts';
import type { EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { storedBody } from './stored-body.ts';
import { consumeWork, type WorkConsumer } from '../nats/work-consumer.ts';
import type { Directory } from '../nats/org-directory.ts';
import { MAX_RATE_LIMIT_BLOCK_MS, blockEnd, hostOf, hostSignalOf, openHostBlocks, type HostBlocks, type HostSignal } from './host-blocks.ts';
import type { AttemptJob, CallbackJob, Job } from './job.ts';
import { classifyAttempt, maskHeaders, type AttemptOutcome } from './outcome.ts';
import type { OutboundResult } from './outbound-client.ts';
import type { OutboundClient } from './outbound-client.ts';
import { CALLBACK_RETRY_DELAYS_MS } from './retry-schedule.ts';
import { sourceGone } from '../commands/execution/ending.ts';
import { loadForwardRequest, recordedBody } from './inbound-request.ts';
import { forwardUrl } from '../inbound/pipeline.ts';
import { signedHeaders } from './signing.ts';
import { inSpan, sourceAttributes, SpanKind } from '../telemetry/tracing.ts';
import { tracedSend } from '../telemetry/traced-send.ts';
import { traceparentOf } from '../nats/follow.ts';
import type { Log } from '../lib/logger.ts';

export interface DispatcherDeps {
  nats: Nats;
  store: EventStore;
  directory: Directory;
  outbound: OutboundClient;
  clock: Clock;
  concurrency: number;
  log: Log;
  supervisor: Supervisor;
  onAttempt?: (job: Job, ms: number) => void;
  /**
   * An attempt's result was stored (once per AttemptFinished this process appends; a
   * re-run after a crash may tell one again). `exchangeMs`: how long the outbound
   * exchange took, null for a result recorded without sending.
   */
  onAttemptFinished?: (result: AttemptResult, exchangeMs: number | null) => void;
  /** Runs a task's or schedule's `on_response`; without it scripts are not run. */
  scripts?: ScriptEngine;
}

const CALLBACK_TIMEOUT_MS = 10_000;
const QUEUED_CHECK_AFTER_MS = 250;
/**
 * A job this late may be a second copy published after DISPATCH's duplicate window
 * (2 min) let the first one's id go (a translator replaying its last events after a
 * long outage): it reads the execution's log first, so a result already stored ends it.
 */
const LATE_CHECK_AFTER_MS = 60_000;
/** A block that ends this soon is waited out in place rather than handed back to the stream. */
const SHORT_BLOCK_MS = 50;
/** An attempt still running after this long is recorded as started, so its execution shows `running`. */
export const RUNNING_VISIBLE_AFTER_MS = 500;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

function envelope<T extends ExecutionEvent['type']>(type: T, orgId: string, data: Extract<ExecutionEvent, { type: T }>['data']) {
  const at = new Date().toISOString();
  return { type, id: newId('evt'), at, org_id: orgId, data } as Extract<ExecutionEvent, { type: T }>;
}

/**
 * Runs jobs from DISPATCH: prepare (what the log and the host say), call (sign and
 * send), record (the host's state, then the attempt's result as one event), and acks
 * only after the result is stored, so a crash re-runs the attempt with the same
 * execution id. Event ids derive from (execution, attempt), so the re-run's events
 * dedupe against the first run's when those were stored. The rules of an execution
 * are the decider's (src/commands/execution/decide.ts).
 */
export function startDispatcher(deps: DispatcherDeps) {
  // Opened before the first job is taken (see `done` below).
  let hosts!: HostBlocks;

  async function sign(job: Job, body: string | Buffer): Promise<Record<string, string>> {
    const org = await deps.directory.organization(job.org_id);
    if (!org) throw new Error(`organization ${job.org_id} not found`);
    return signedHeaders({ secret: org.webhook_secret, taskId: job.source.id, executionId: job.execution_id, body, nowMs: deps.clock.now() });
  }

  const append = (job: Job, events: ExecutionEvent[]) =>
    Promise.all(events.map((e) => deps.store.append(SUBJECTS.execution(job.org_id, job.execution_id), e)));
  const told = (events: ExecutionEvent[], exchangeMs: number | null) => {
    for (const e of events) if (e.type === 'AttemptFinished') deps.onAttemptFinished?.(e.data, exchangeMs);
  };

  /**
   * What the attempt needs to know before it is sent, read only where it can matter:
   * the execution's log for retries, deferrals, endpoint forwards (a resume or a
   * replayed translator may send a job again) and redeliveries (its result may be
   * stored already); the task's log for a job that waited (it may have been deleted);
   * the stored inbound request for a forward. A fresh first attempt reads nothing.
   */
  async function prepare(job: AttemptJob, redelivered: boolean) {
    const host = hostOf(job.request.url);
    let blockedUntil = host ? hosts.blockedUntil(job.org_id, host) : 0;
    if (blockedUntil && blockedUntil - deps.clock.now() <= SHORT_BLOCK_MS) {
      await sleep(blockedUntil - deps.clock.now());
      blockedUntil = host ? hosts.blockedUntil(job.org_id, host) : 0;
    }
    const waitedMs = deps.clock.now() - Date.parse(job.scheduled_for);
    const waited = job.source.type === 'task' && waitedMs >= QUEUED_CHECK_AFTER_MS;
    const readLog = blockedUntil || job.attempt > 1 || job.inbound || redelivered || waitedMs >= LATE_CHECK_AFTER_MS;
    const [last, gone, forward] = await Promise.all([
      readLog ? deps.store.last<ExecutionEvent>(SUBJECTS.execution(job.org_id, job.execution_id)) : null,
      waited ? sourceGone(deps.store, job.org_id, job.source) : false,
      job.inbound && !blockedUntil ? loadForwardRequest(deps.nats, job.inbound) : null,
    ]);
    const plan = planAttempt({
      job,
      sofar: readLog ? executionSoFar(last?.event ?? null, job.attempt) : null,
      sourceGone: gone,
      requestGone: !!job.inbound && !blockedUntil && !forward,
      forwardMethod: forward?.method ?? null,
      host,
      blockedUntil,
      // Read only to word a deferral: a host that is not blocked needs none.
      hostState: host && blockedUntil ? hosts.state(job.org_id, host) : null,
      nowMs: deps.clock.now(),
    });
    return { plan, host, forward };
  }

  /** Counts the attempt against its host first, so the block holds for every dispatcher before the result is out. */
  async function recordHost(job: AttemptJob, host: string | null, signal: HostSignal | null, nowMs: number): Promise<number> {
    let end = host ? hosts.blockedUntil(job.org_id, host) : 0;
    if (!host || !signal) return end;
    try {
      end = blockEnd(await hosts.record(job.org_id, host, signal), deps.clock.now());
    } catch (err) {
      deps.log(`dispatcher: host state of ${host} for ${job.org_id} not recorded: ${(err as Error).message}`);
      if (signal.kind === 'rate_limited') end = Math.max(end, nowMs + deps.clock.wait(Math.min(signal.blockMs, MAX_RATE_LIMIT_BLOCK_MS)));
    }
    return end;
  }

  /**
   * A task's or schedule's `on_response(res, task)` after the attempt: its verdict may
   * replace the outcome; an error or a limit hit is a line of the logs and keeps it.
   */
  async function onResponse(job: AttemptJob, result: OutboundResult, outcome: AttemptOutcome): Promise<{ outcome: AttemptOutcome; logs: string[] }> {
    if (!job.script || !deps.scripts) return { outcome, logs: [] };
    const res = result.kind === 'response'
      ? { status: result.statusCode, headers: result.headers, body: result.body, duration_ms: Math.round(result.durationMs) }
      : { status: null, headers: {}, body: '', duration_ms: Math.round(result.durationMs) };
    const task = { id: job.source.id, name: job.source.name, url: job.request.url, method: job.request.method, attempt: job.attempt };
    const out = await deps.scripts.run({ script: job.script, hook: 'on_response', args: [res, task] });
    if (out.error) return { outcome, logs: [...out.logs, `on_response failed: ${out.error}`] };
    if (out.missing) return { outcome, logs: out.logs };
    return { outcome: applyScriptVerdict(outcome, out.result[0]), logs: out.logs };
  }

  /**
   * Runs one attempt. Resolves to a delay in ms when the job must go back to the
   * stream (its host is blocked), undefined when it is done and can be acked.
   */
  async function runAttempt(job: AttemptJob, redelivered: boolean): Promise<number | undefined> {
    const { plan, host, forward } = await prepare(job, redelivered);
    switch (plan.kind) {
      case 'done':
        return undefined;
      case 'record':
        await append(job, plan.events);
        told(plan.events, null);
        return undefined;
      case 'defer':
        await append(job, plan.events);
        return Math.max(plan.untilMs - deps.clock.now(), 1);
      case 'send':
        break;
      default:
        return unreachable(plan);
    }

    const method = forward?.method ?? job.request.method;
    const sentBody = forward ? forward.body : job.request.body;
    const headers = {
      ...(forward?.headers ?? job.request.headers),
      ...(job.inbound ? { 'X-Jetcron-Event-Id': job.inbound.event_id } : {}),
      ...(await sign(job, sentBody ?? '')),
    };
    const url = forward ? forwardUrl(job.request.url, forward.query) : job.request.url;
    // A retry is recorded as started at once; a first attempt only if it outlives RUNNING_VISIBLE_AFTER_MS.
    let started: Promise<unknown> | undefined;
    const markStarted = () => {
      started = append(job, [attemptStarted(job, new Date(), plan.uncounted)]);
      // Awaited after the request; until then a refusal must not count as unhandled (it would crash the process).
      started.catch(() => {});
    };
    const slow = job.attempt > 1 ? (markStarted(), undefined) : setTimeout(markStarted, RUNNING_VISIBLE_AFTER_MS);
    const result = await tracedSend(deps.outbound, { url, method, headers, body: sentBody ?? undefined, timeoutMs: job.request.timeout_ms });
    clearTimeout(slow);

    const nowMs = deps.clock.now();
    const classified = classifyAttempt(job, result, nowMs);
    // The host's health is what the HTTP exchange says; the script decides only the outcome.
    const signal = host ? hostSignalOf(result, classified) : null;
    const { outcome, logs } = await onResponse(job, result, classified);
    const finished = decideAttemptResult({
      job,
      uncounted: plan.uncounted,
      outcome,
      // An endpoint's deliveries carry what its script logged in the router; tasks log in on_response.
      scriptLogs: job.inbound?.script_logs ?? logs,
      signal,
      host,
      hostBlockEnd: await recordHost(job, host, signal, nowMs),
      nowMs,
      wait: deps.clock.wait,
      jitter: Math.random(),
      exchange: {
        started_at: result.startedAt.toISOString(),
        finished_at: new Date(result.startedAt.getTime() + result.durationMs).toISOString(),
        duration_ms: Math.round(result.durationMs),
        request: { method, url, headers: maskHeaders(headers), ...recordedBody(sentBody) },
        ...(result.kind === 'response' ? storedBody(result.bytes, result.truncated) : { response_body: null }),
        response_truncated: result.kind === 'response' ? result.truncated : false,
        response_headers: result.kind === 'response' ? result.headers : null,
      },
    });
    // The start (if recorded) goes first in the execution's log.
    if (started) await started;
    await append(job, [finished]);
    deps.log.debug?.('attempt finished', () => {
      const d = finished.data as AttemptResult;
      return {
        org_id: job.org_id, [`${job.source.type}_id`]: job.source.id, execution_id: job.execution_id, attempt: job.attempt,
        status: d.status, status_code: d.status_code, duration_ms: d.duration_ms, next_attempt_at: d.next_attempt_at,
      };
    });
    told([finished], result.durationMs);
    return undefined;
  }

  async function runCallback(job: CallbackJob): Promise<undefined> {
    const headers = { 'Content-Type': 'application/json', ...(await sign(job, job.body)) };
    const result = await tracedSend(deps.outbound, { url: job.url, method: 'POST', headers, body: job.body, timeoutMs: CALLBACK_TIMEOUT_MS });
    const ok = result.kind === 'response' && result.statusCode >= 200 && result.statusCode < 300;
    const delay = CALLBACK_RETRY_DELAYS_MS[job.attempt - 1];
    const event = envelope('CallbackAttempted', job.org_id, {
      execution_id: job.execution_id,
      url: job.url,
      attempt: job.attempt,
      status_code: result.kind === 'response' ? result.statusCode : null,
      error_message: ok ? null : result.kind === 'response' ? `HTTP ${result.statusCode}` : result.message,
      next_attempt_at: !ok && delay !== undefined ? new Date(deps.clock.now() + deps.clock.wait(delay)).toISOString() : null,
      job,
    });
    event.id = `${job.execution_id}.cb${job.attempt}`;
    await deps.store.append(SUBJECTS.execution(job.org_id, job.execution_id), event);
  }

  /** One job as a CONSUMER span continuing the trace of whoever put it to work (the header of its DISPATCH message). */
  async function handle(msg: JsMsg, handedBack: () => boolean): Promise<void> {
    const job = decodeJson<Job>(msg.data);
    const attributes = () => sourceAttributes(job.org_id, job.source, {
      'jetcron.execution_id': job.execution_id, 'jetcron.attempt': job.attempt, 'messaging.system': 'nats', 'messaging.destination.name': msg.subject,
    });
    return inSpan(`${job.kind} ${job.source.type}`, { kind: SpanKind.CONSUMER, traceparent: traceparentOf(msg), attributes }, () => runJob(msg, job, handedBack));
  }

  async function runJob(msg: JsMsg, job: Job, handedBack: () => boolean): Promise<void> {
    const t0 = performance.now();
    // Ticks never reach DISPATCH (the scheduler records them); one that did is dropped.
    const backInMs = job.kind === 'attempt' ? await runAttempt(job, msg.info.deliveryCount > 1) : job.kind === 'callback' ? await runCallback(job) : undefined;
    if (backInMs !== undefined) {
      // Its host is blocked: JetStream redelivers the job when the block ends.
      if (!handedBack()) msg.nak(backInMs);
      return;
    }
    if (!handedBack()) msg.ack();
    deps.onAttempt?.(job, performance.now() - t0);
  }

  let work: WorkConsumer | undefined;
  const ready = (async () => {
    hosts = await openHostBlocks({ nats: deps.nats, clock: deps.clock, log: deps.log });
    work = consumeWork({
      nats: deps.nats,
      stream: CONSUMERS.dispatchers.stream,
      durable: CONSUMERS.dispatchers.durable_name,
      concurrency: deps.concurrency,
      supervisor: deps.supervisor,
      log: deps.log,
      handle,
    });
  })();

  return {
    /** Organization + host pairs blocked now (per-host backoff), 0 until the blocks are loaded. */
    hostBlocksActive: () => hosts?.activeBlocks() ?? 0,
    /** Stops taking work; in-flight attempts get `graceMs` to finish, then go back to the stream. */
    async stop(graceMs = 10_000) {
      await ready.catch(() => {});
      await work?.stop(graceMs);
      await hosts?.close();
    },
  };
}
