import type { AttemptResult, ExecutionEvent } from '../commands/execution/types.ts';
import { applyScriptVerdict, attemptStarted, callbackAttempted, decideAttemptResult } from '../commands/execution/decide.ts';
import { commandMeta } from '../commands/execute.ts';
import type { ScriptEngine } from '../scripts/engine.ts';
import type { Clock } from '../lib/clock.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { HostBlocks } from './host-blocks.ts';
import { MAX_RATE_LIMIT_BLOCK_MS, blockEnd, hostOf, hostSignalOf, type HostSignal } from '../commands/host-block/rules.ts';
import type { AttemptJob, CallbackJob, Job } from '../commands/execution/job.ts';
import { classifyAttempt, maskHeaders, type AttemptOutcome } from '../commands/execution/outcome.ts';
import type { OutboundResult } from '../commands/execution/exchange.ts';
import type { OutboundClient } from './outbound-client.ts';
import { recordedBody } from './inbound-request.ts';
import { forwardUrl, type ForwardRequest } from '../inbound/pipeline.ts';
import { hasStandardWebhookHeaders, signedHeaders } from './signing.ts';
import { signingSecrets } from '../commands/organization/decide.ts';
import { storedBody } from './stored-body.ts';
import { tracedSend } from './traced-send.ts';
import type { Log } from '../lib/logger.ts';

export interface AttemptRunnerDeps {
  directory: Directory;
  outbound: OutboundClient;
  clock: Clock;
  log: Log;
  hosts: () => HostBlocks;
  /** Runs a task's or schedule's `on_response`; without it scripts are not run. */
  scripts?: ScriptEngine;
}

const CALLBACK_TIMEOUT_MS = 10_000;
/** A block that ends this soon is waited out in place rather than deferred. */
const SHORT_BLOCK_MS = 50;
/** An attempt still running after this long is recorded as started, so its execution shows `running`. */
export const RUNNING_VISIBLE_AFTER_MS = 500;

export interface SendOptions {
  /** The sender's fence, asked just before the request is written (see OutboundRequest.mayWrite). */
  mayWrite?: (() => boolean) | undefined;
}

/**
 * Sends an attempt (or a callback) and decides the event that records it: signing,
 * the request, the host's health, `on_response`, the execution's rules. The task
 * partition owners run it; they learn what to send from the log and store what
 * happened in their partition's commits.
 */
export function createAttemptRunner(deps: AttemptRunnerDeps) {
  /** `webhookId`: Standard Webhooks' message id, null to add none of its headers. */
  async function sign(job: Job, body: string | Buffer, webhookId: string | null): Promise<Record<string, string>> {
    const org = await deps.directory.organization(job.org_id);
    if (!org) throw new Error(`organization ${job.org_id} not found`);
    const nowMs = deps.clock.now();
    return signedHeaders({ secrets: signingSecrets(org, nowMs), taskId: job.source.id, executionId: job.execution_id, webhookId, body, nowMs });
  }

  /**
   * The attempt's host and when its block for the organization ends (0: not blocked);
   * a block about to end is waited out here, so the attempt is sent rather than deferred.
   */
  async function hostBlock(job: AttemptJob): Promise<{ host: string | null; blockedUntil: number }> {
    const hosts = deps.hosts();
    const host = hostOf(job.request.url);
    let blockedUntil = host ? hosts.blockedUntil(job.org_id, host) : 0;
    if (blockedUntil && blockedUntil - deps.clock.now() <= SHORT_BLOCK_MS) {
      await new Promise((r) => setTimeout(r, Math.max(0, blockedUntil - deps.clock.now())));
      blockedUntil = host ? hosts.blockedUntil(job.org_id, host) : 0;
    }
    return { host, blockedUntil };
  }

  /** Counts the attempt against its host first, so the block holds for every dispatcher before the result is out. */
  async function recordHost(job: AttemptJob, host: string | null, signal: HostSignal | null, nowMs: number): Promise<number> {
    const hosts = deps.hosts();
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
   * Sends one attempt that its plan says to send and decides its `AttemptFinished`
   * (`exchangeMs`: how long the exchange took). `recordStart` stores an `AttemptStarted`:
   * at once for a retry, and for a first attempt only if it outlives
   * RUNNING_VISIBLE_AFTER_MS; it is stored before this resolves, so the start goes
   * first in the execution's history.
   */
  async function send(
    job: AttemptJob,
    opts: SendOptions & {
      uncounted: number;
      host: string | null;
      forward: ForwardRequest | null;
      recordStart: (event: ExecutionEvent) => Promise<unknown>;
      /** Told the moment the request starts (after signing): a key's rate window counts the start from then. */
      onSending?: (atMs: number) => void;
    },
  ): Promise<{ finished: ExecutionEvent; exchangeMs: number }> {
    let started: Promise<unknown> | undefined;
    const markStarted = () => {
      const nowMs = deps.clock.now();
      started = opts.recordStart(attemptStarted(job, new Date(nowMs), opts.uncounted, nowMs));
      // Awaited after the request; until then a refusal must not count as unhandled (it would crash the process).
      started.catch(() => {});
    };
    let slow: NodeJS.Timeout | undefined;
    try {
      const out = await exchange(job, opts, () => {
        opts.onSending?.(Date.now());
        if (job.attempt > 1) markStarted();
        else slow = setTimeout(markStarted, RUNNING_VISIBLE_AFTER_MS);
      });
      clearTimeout(slow);
      if (started) await started;
      return out;
    } finally {
      clearTimeout(slow);
    }
  }

  async function exchange(
    job: AttemptJob,
    opts: SendOptions & { uncounted: number; host: string | null; forward: ForwardRequest | null },
    onStart: () => void,
  ): Promise<{ finished: ExecutionEvent; exchangeMs: number }> {
    const { forward, host } = opts;
    const method = forward?.method ?? job.request.method;
    const sentBody = forward ? forward.body : job.request.body;
    const given = forward?.headers ?? job.request.headers;
    // A forward of a Standard Webhooks sender's request keeps its headers, so the receiver can still verify that sender.
    const webhookId = forward && hasStandardWebhookHeaders(given) ? null : job.execution_id;
    const headers = {
      ...given,
      ...(job.inbound ? { 'X-Jetcron-Event-Id': job.inbound.event_id } : {}),
      ...(await sign(job, sentBody ?? '', webhookId)),
    };
    const url = forward ? forwardUrl(job.request.url, forward.query) : job.request.url;
    onStart();
    const result = await tracedSend(deps.outbound, { url, method, headers, body: sentBody ?? undefined, timeoutMs: job.request.timeout_ms, mayWrite: opts.mayWrite });

    const nowMs = deps.clock.now();
    const classified = classifyAttempt(job, result, nowMs);
    // The host's health is what the HTTP exchange says; the script decides only the outcome.
    const signal = host ? hostSignalOf(result, classified) : null;
    const { outcome, logs } = await onResponse(job, result, classified);
    const hostBlockEnd = await recordHost(job, host, signal, nowMs);
    const meta = commandMeta(deps.clock, nowMs);
    const finished = decideAttemptResult({
      job,
      uncounted: opts.uncounted,
      nowMs,
      wait: meta.scaleWait,
      outcome,
      // An endpoint's deliveries carry what its script logged in the router; tasks log in on_response.
      scriptLogs: job.inbound?.script_logs ?? logs,
      signal,
      host,
      hostBlockEnd,
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
    deps.log.debug?.('attempt finished', () => {
      const d = finished.data as AttemptResult;
      return {
        org_id: job.org_id, [`${job.source.type}_id`]: job.source.id, execution_id: job.execution_id, attempt: job.attempt,
        status: d.status, status_code: d.status_code, duration_ms: d.duration_ms, next_attempt_at: d.next_attempt_at,
      };
    });
    return { finished, exchangeMs: result.durationMs };
  }

  /** One delivery try of a completion callback, as the `CallbackAttempted` that records it. */
  async function sendCallback(job: CallbackJob, opts: SendOptions = {}): Promise<ExecutionEvent> {
    const headers = { 'Content-Type': 'application/json', ...(await sign(job, job.body, `${job.execution_id}-callback`)) };
    const result = await tracedSend(deps.outbound, { url: job.url, method: 'POST', headers, body: job.body, timeoutMs: CALLBACK_TIMEOUT_MS, mayWrite: opts.mayWrite });
    const meta = commandMeta(deps.clock);
    return callbackAttempted(job, result, meta.nowMs, meta.scaleWait);
  }

  return { hostBlock, send, sendCallback };
}

export type AttemptRunner = ReturnType<typeof createAttemptRunner>;
