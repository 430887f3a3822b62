import type { JsMsg } from '@nats-io/jetstream';
import { CONSUMERS, SUBJECTS } from '../../streams/definitions.ts';
import type { AttemptResult, ExecutionEvent } from '../commands/execution/types.ts';
import type { EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { storedBody } from './stored-body.ts';
import { consumeWork, type WorkConsumer } from '../nats/work-consumer.ts';
import type { Directory } from '../nats/org-directory.ts';
import { FAILURES_BEFORE_BLOCK, MAX_RATE_LIMIT_BLOCK_MS, blockEnd, hostOf, hostSignalOf, openHostBlocks, type HostBlocks } from './host-blocks.ts';
import type { AttemptJob, CallbackJob, Job } from './job.ts';
import { classifyAttempt, maskHeaders } from './outcome.ts';
import type { OutboundClient } from './outbound-client.ts';
import { CALLBACK_RETRY_DELAYS_MS, retryDelayMs, retryLandsAfter } from './retry-schedule.ts';
import { executionCancelled, sourceGone } from '../commands/execution/ending.ts';
import { loadForwardRequest, recordedBody } from './inbound-request.ts';
import { forwardUrl } from '../inbound/pipeline.ts';
import { signedHeaders } from './signing.ts';

export interface DispatcherDeps {
  nats: Nats;
  store: EventStore;
  directory: Directory;
  outbound: OutboundClient;
  clock: Clock;
  concurrency: number;
  log: (m: string) => void;
  supervisor: Supervisor;
  onAttempt?: (job: Job, ms: number) => void;
}

const CALLBACK_TIMEOUT_MS = 10_000;
const QUEUED_CHECK_AFTER_MS = 250;
/** A block that ends this soon is waited out in place rather than handed back to the stream. */
const SHORT_BLOCK_MS = 50;
/** 429 attempts of one execution that do not use a retry; later ones count like a 5xx. */
export const MAX_UNCOUNTED_ATTEMPTS = 20;
/** The least wait before the attempt after a 429, whatever its Retry-After says. */
const MIN_RATE_LIMIT_WAIT_MS = 1_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

function envelope<T extends ExecutionEvent['type']>(type: T, orgId: string, data: Extract<ExecutionEvent, { type: T }>['data']) {
  const at = new Date().toISOString();
  return { type, id: newId('evt'), at, org_id: orgId, data } as Extract<ExecutionEvent, { type: T }>;
}

/**
 * Runs jobs from DISPATCH: signs and sends the request, records the attempt as
 * events and acks only after they are stored, so a crash re-runs the attempt
 * with the same execution id. Event ids derive from (execution, attempt), so the
 * re-run's events dedupe against the first run's when those were stored.
 */
export function startDispatcher(deps: DispatcherDeps) {
  // Opened before the first job is taken (see `done` below).
  let hosts!: HostBlocks;

  async function sign(job: Job, body: string | Buffer): Promise<Record<string, string>> {
    const org = await deps.directory.organization(job.org_id);
    if (!org) throw new Error(`organization ${job.org_id} not found`);
    return signedHeaders({ secret: org.webhook_secret, taskId: job.source.id, executionId: job.execution_id, body, nowMs: deps.clock.now() });
  }

  /**
   * A job queued before its task was deleted must not run. Timers are purged with
   * the task; what remains is a job that waited in DISPATCH, so only a job that has
   * waited pays for the check (a round trip per attempt on the hot path otherwise).
   */
  async function taskGone(job: AttemptJob): Promise<boolean> {
    if (job.source.type !== 'task' || deps.clock.now() - Date.parse(job.scheduled_for) < QUEUED_CHECK_AFTER_MS) return false;
    return sourceGone(deps.store, job.org_id, job.source);
  }

  /** Records that the execution will not run, and lets its lane go on. */
  async function cancel(job: AttemptJob, reason: string): Promise<undefined> {
    const event = executionCancelled(job.org_id, { execution_id: job.execution_id, source: job.source, reason, lane: job.lane }, deps.clock.now());
    await deps.store.append(SUBJECTS.execution(job.org_id, job.execution_id), event);
    return undefined;
  }

  /**
   * What the execution's log says before this attempt: how many earlier attempts
   * were uncounted 429s, and whether this attempt (or the execution) is already
   * recorded as done, which happens when a job is redelivered after its result
   * was stored but before the ack. One direct get; paid by retries and deferrals only.
   */
  async function executionSoFar(job: AttemptJob): Promise<{ uncounted: number; done: boolean }> {
    const last = await deps.store.last<ExecutionEvent>(SUBJECTS.execution(job.org_id, job.execution_id));
    if (!last) return { uncounted: 0, done: false };
    const e = last.event;
    switch (e.type) {
      case 'AttemptFinished':
        return { uncounted: e.data.uncounted_attempts ?? 0, done: e.data.attempt >= job.attempt };
      case 'AttemptStarted':
      case 'AttemptDeferred':
        return { uncounted: e.data.uncounted_attempts ?? 0, done: e.data.attempt > job.attempt };
      case 'ExecutionCancelled':
        return { uncounted: 0, done: true };
      default:
        return { uncounted: 0, done: e.type === 'CallbackAttempted' };
    }
  }

  /**
   * Runs one attempt. Resolves to a delay in ms when the job must go back to the
   * stream (its host is blocked), undefined when it is done and can be acked.
   */
  async function runAttempt(job: AttemptJob, redelivered: boolean): Promise<number | undefined> {
    const subject = SUBJECTS.execution(job.org_id, job.execution_id);
    if (await taskGone(job)) return cancel(job, 'task deleted');
    const host = hostOf(job.request.url);
    let blockedUntil = host ? hosts.blockedUntil(job.org_id, host) : 0;
    if (blockedUntil && blockedUntil - deps.clock.now() <= SHORT_BLOCK_MS) {
      await sleep(blockedUntil - deps.clock.now());
      blockedUntil = host ? hosts.blockedUntil(job.org_id, host) : 0;
    }
    let uncounted = 0;
    // An endpoint's request is the stored inbound one; its job may also be one a
    // resume or a replayed translator sent again, so its log is always checked. So is a
    // redelivered job's: its result may be stored while its AttemptStarted was lost (a
    // leader election), and sending it again would record a start after the end.
    const [sofar, forward] = await Promise.all([
      blockedUntil || job.attempt > 1 || job.inbound || redelivered ? executionSoFar(job) : null,
      job.inbound && !blockedUntil ? loadForwardRequest(deps.nats, job.inbound) : null,
    ]);
    if (sofar) {
      if (sofar.done) return undefined;
      uncounted = sofar.uncounted;
    }
    if (job.inbound && !blockedUntil && !forward) {
      return cancel(job, 'the inbound event is no longer stored (older than 30 days, or its endpoint was deleted)');
    }
    if (blockedUntil && host) {
      // Not sent: the block is the host's, so the attempt keeps its number and waits.
      const state = hosts.state(job.org_id, host);
      const deferred = envelope('AttemptDeferred', job.org_id, {
        execution_id: job.execution_id,
        source: job.source,
        attempt: job.attempt,
        scheduled_for: new Date(blockedUntil).toISOString(),
        reason: state?.reason === 'rate_limited'
          ? `${host} answered 429: blocked for this organization`
          : `${host} failed ${state?.failures ?? FAILURES_BEFORE_BLOCK} times in a row: blocked for this organization`,
        host,
        ...(uncounted ? { uncounted_attempts: uncounted } : {}),
      });
      deferred.id = `${job.execution_id}.${job.attempt}.deferred.${blockedUntil}`;
      await deps.store.append(subject, deferred);
      return Math.max(blockedUntil - deps.clock.now(), 1);
    }

    const startedAt = new Date();
    const started = envelope('AttemptStarted', job.org_id, {
      execution_id: job.execution_id,
      source: job.source,
      attempt: job.attempt,
      started_at: startedAt.toISOString(),
      scheduled_for: job.scheduled_for,
      ...(uncounted ? { uncounted_attempts: uncounted } : {}),
    });
    started.id = `${job.execution_id}.${job.attempt}.started`;
    const startedAck = deps.store.append(subject, started);
    // Awaited after the request; until then a refusal must not count as unhandled (it would crash the process).
    startedAck.catch(() => {});
    const method = forward?.method ?? job.request.method;
    const sentBody = forward ? forward.body : job.request.body;
    const headers = {
      ...(forward?.headers ?? job.request.headers),
      ...(job.inbound ? { 'X-Jetcron-Event-Id': job.inbound.event_id } : {}),
      ...(await sign(job, sentBody ?? '')),
    };
    const url = forward ? forwardUrl(job.request.url, forward.query) : job.request.url;
    const result = await deps.outbound.send({
      url,
      method,
      headers,
      body: sentBody ?? undefined,
      timeoutMs: job.request.timeout_ms,
    });
    const now = deps.clock.now();
    const outcome = classifyAttempt(job, result, now);

    // The host's state first, so the block holds for every dispatcher before this attempt's result is out.
    const signal = host ? hostSignalOf(result, outcome) : null;
    let hostBlockEnd = host ? hosts.blockedUntil(job.org_id, host) : 0;
    if (host && signal) {
      try {
        hostBlockEnd = blockEnd(await hosts.record(job.org_id, host, signal), deps.clock.now());
      } catch (err) {
        deps.log(`dispatcher: host state of ${host} for ${job.org_id} not recorded: ${(err as Error).message}`);
        if (signal.kind === 'rate_limited') hostBlockEnd = Math.max(hostBlockEnd, now + deps.clock.wait(Math.min(signal.blockMs, MAX_RATE_LIMIT_BLOCK_MS)));
      }
    }

    // A 429 is the host's doing, not the task's: it does not use one of the task's
    // retries (bounded, so a target that always answers 429 cannot keep an execution alive forever).
    const rateLimited = signal?.kind === 'rate_limited';
    const free = rateLimited && uncounted < MAX_UNCOUNTED_ATTEMPTS;
    let nextAttemptAt: string | null = null;
    let errorMessage = outcome.error_message;
    if (free) {
      uncounted++;
      nextAttemptAt = new Date(Math.max(hostBlockEnd, now + deps.clock.wait(MIN_RATE_LIMIT_WAIT_MS))).toISOString();
    } else {
      const counted = job.attempt - uncounted;
      if (outcome.retryable && counted < job.max_attempts) {
        const backoff = deps.clock.wait(retryDelayMs(job.source.type, counted));
        const wait = Math.max(backoff, deps.clock.wait(outcome.retry_after_ms ?? 0));
        nextAttemptAt = new Date(Math.max(now + wait, hostBlockEnd)).toISOString();
      }
    }
    // A schedule's retry that would land after its next tick is skipped: the tick takes over.
    if (nextAttemptAt && job.next_tick_at && retryLandsAfter(job.next_tick_at, nextAttemptAt)) {
      nextAttemptAt = null;
      errorMessage = `${errorMessage ?? 'failed'}; retry skipped: it would land after the next run at ${job.next_tick_at}`;
    }
    if (host && hostBlockEnd > now && signal && signal.kind !== 'up') {
      errorMessage = `${errorMessage ?? 'failed'}; ${host} blocked for this organization until ${new Date(hostBlockEnd).toISOString()}`;
    }
    const data: AttemptResult = {
      execution_id: job.execution_id,
      source: job.source,
      attempt: job.attempt,
      status: outcome.status,
      status_code: outcome.status_code,
      error_message: errorMessage,
      scheduled_for: job.scheduled_for,
      started_at: result.startedAt.toISOString(),
      finished_at: new Date(result.startedAt.getTime() + result.durationMs).toISOString(),
      duration_ms: Math.round(result.durationMs),
      request: { method, url, headers: maskHeaders(headers), ...recordedBody(sentBody) },
      ...(result.kind === 'response' ? storedBody(result.bytes, result.truncated) : { response_body: null }),
      response_truncated: result.kind === 'response' ? result.truncated : false,
      response_headers: result.kind === 'response' ? result.headers : null,
      script_logs: [],
      next_attempt_at: nextAttemptAt,
      callback_url: job.callback_url,
      push_callback_url: job.push_callback_url,
      lane: job.lane,
      ...(uncounted ? { uncounted_attempts: uncounted } : {}),
      ...(job.inbound ? { inbound: { event_id: job.inbound.event_id, seq: job.inbound.seq, origin_seq: job.inbound.origin_seq } } : {}),
    };
    const finished = envelope('AttemptFinished', job.org_id, data);
    finished.id = `${job.execution_id}.${job.attempt}.finished`;
    await Promise.all([startedAck, deps.store.append(subject, finished)]);
    return undefined;
  }

  async function runCallback(job: CallbackJob): Promise<undefined> {
    const headers = { 'Content-Type': 'application/json', ...(await sign(job, job.body)) };
    const result = await deps.outbound.send({ url: job.url, method: 'POST', headers, body: job.body, timeoutMs: CALLBACK_TIMEOUT_MS });
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

  async function handle(msg: JsMsg, handedBack: () => boolean): Promise<void> {
    const job = decodeJson<Job>(msg.data);
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
    /** Stops taking work; in-flight attempts get `graceMs` to finish, then go back to the stream. */
    async stop(graceMs = 10_000) {
      await ready.catch(() => {});
      await work?.stop(graceMs);
      await hosts?.close();
    },
  };
}
