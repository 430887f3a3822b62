import type { JsMsg } from '@nats-io/jetstream';
import { CONSUMERS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { AttemptResult, ExecutionEvent } from '../commands/execution/types.ts';
import { evolveExecution, executionSoFar, planAttempt } from '../commands/execution/decide.ts';
import type { ScriptEngine } from '../scripts/engine.ts';
import { unreachable } from '../lib/unreachable.ts';
import type { EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { createAttemptRunner } from './attempt-runner.ts';
import { consumeWork, type WorkConsumer } from '../nats/work-consumer.ts';
import type { Directory } from '../nats/org-directory.ts';
import { openHostBlocks, type HostBlocks } from './host-blocks.ts';
import type { AttemptJob, CallbackJob, Job } from '../commands/execution/job.ts';
import type { OutboundClient } from './outbound-client.ts';
import { sourceGone } from '../commands/execution/ending.ts';
import { loadForwardRequest } from './inbound-request.ts';
import { inSpan, sourceAttributes, SpanKind } from '../telemetry/tracing.ts';
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

const QUEUED_CHECK_AFTER_MS = 250;
/**
 * A job this late may be a second copy published after DISPATCH's duplicate window
 * (2 min) let the first one's id go (a translator replaying its last events after a
 * long outage): it reads the execution's log first, so a result already stored ends it.
 */
const LATE_CHECK_AFTER_MS = 60_000;

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

  const runner = createAttemptRunner({ directory: deps.directory, outbound: deps.outbound, clock: deps.clock, log: deps.log, scripts: deps.scripts, hosts: () => hosts });

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
    const { host, blockedUntil } = await runner.hostBlock(job);
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
      sofar: readLog ? executionSoFar(last ? evolveExecution(null, last.event) : null, job.attempt) : null,
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

    const { finished, exchangeMs } = await runner.send(job, { uncounted: plan.uncounted, host, forward, recordStart: (e) => append(job, [e]) });
    await append(job, [finished]);
    told([finished], exchangeMs);
    return undefined;
  }

  async function runCallback(job: CallbackJob): Promise<undefined> {
    await deps.store.append(SUBJECTS.execution(job.org_id, job.execution_id), await runner.sendCallback(job));
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
