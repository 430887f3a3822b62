import type { JsMsg } from '@nats-io/jetstream';
import { CONSUMERS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { NotificationChannel, NotificationDelivery, NotificationEvent } from '../commands/notification/types.ts';
import type { OutboundClient } from '../dispatchers/outbound-client.ts';
import { signedHeaders } from '../dispatchers/signing.ts';
import { signingSecrets } from '../commands/organization/decide.ts';
import type { EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { consumeWork } from '../nats/work-consumer.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { Mailer } from './mailer.ts';
import type { NotificationJob } from './plan.ts';
import { traceparentOf } from '../nats/follow.ts';
import { inSpan, SpanKind } from '../telemetry/tracing.ts';
import { tracedSend } from '../telemetry/traced-send.ts';

/** Waits before the 2nd and 3rd try (scaled by JETCRON_TIME_SCALE): 3 tries in all. */
export const NOTIFY_RETRY_DELAYS_MS = [5_000, 20_000] as const;
export const NOTIFY_MAX_TRIES = NOTIFY_RETRY_DELAYS_MS.length + 1;
const WEBHOOK_TIMEOUT_MS = 10_000;

export interface DelivererDeps {
  nats: Nats;
  store: EventStore;
  directory: Directory;
  outbound: OutboundClient;
  mailer: Mailer | null;
  clock: Clock;
  concurrency: number;
  log: (m: string) => void;
  supervisor: Supervisor;
  /** After each try: `retried` = failed, handed back for another; `failed` = given up. */
  onTry?: (channel: NotificationChannel, result: 'sent' | 'retried' | 'failed') => void;
}

type TryResult = { ok: true; status_code: number | null } | { ok: false; final: boolean; status_code: number | null; error: string };

/**
 * Delivers notifications from NOTIFY (durable consumer `notifiers`, shared by every
 * notifier process): signs and POSTs webhooks with the outbound client (SSRF guard
 * included), sends email through SMTP. A failed try is handed back with `nak(delay)`
 * (5 s, then 20 s, scaled); the result (`NotificationSent` or, after the last try,
 * `NotificationFailed`) is appended to `evt.<org>.notify.<id>` before the ack.
 * A slow or dead target holds one of `concurrency` slots for at most its timeout and
 * then waits in the stream, so it never holds up other notifications.
 */
export function startDeliverer(deps: DelivererDeps) {

  async function sendWebhook(job: NotificationJob): Promise<TryResult> {
    const org = await deps.directory.organization(job.org_id);
    if (!org) return { ok: false, final: true, status_code: null, error: `organization ${job.org_id} not found` };
    const body = job.body ?? '';
    const nowMs = deps.clock.now();
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      'User-Agent': 'jetcron-notifier',
      'X-Jetcron-Event': job.event,
      'X-Jetcron-Notification-Id': job.id,
      ...signedHeaders({
        secrets: signingSecrets(org, nowMs),
        taskId: job.source.type === 'task' ? job.source.id : undefined,
        executionId: job.signing_id,
        webhookId: job.id,
        body,
        nowMs,
      }),
    };
    const r = await tracedSend(deps.outbound, { url: job.target, method: 'POST', headers, body, timeoutMs: WEBHOOK_TIMEOUT_MS });
    if (r.kind === 'response') {
      if (r.statusCode >= 200 && r.statusCode < 300) return { ok: true, status_code: r.statusCode };
      return { ok: false, final: false, status_code: r.statusCode, error: `HTTP ${r.statusCode}` };
    }
    // A refused or invalid target will not get better by waiting.
    return { ok: false, final: r.error === 'refused_target' || r.error === 'invalid_url', status_code: null, error: r.message };
  }

  async function sendEmail(job: NotificationJob): Promise<TryResult> {
    if (!deps.mailer) return { ok: false, final: true, status_code: null, error: 'email is off on this notifier (no SMTP_URL)' };
    try {
      await deps.mailer.send({ to: job.target, subject: job.subject ?? job.event, text: job.text ?? '' });
      return { ok: true, status_code: null };
    } catch (err) {
      const e = err as { message?: string; responseCode?: number };
      // 5xx from the SMTP server is a permanent refusal (bad address, relay denied).
      const permanent = typeof e.responseCode === 'number' && e.responseCode >= 500;
      return { ok: false, final: permanent, status_code: null, error: e.message ?? String(err) };
    }
  }

  async function record(job: NotificationJob, result: TryResult, tries: number): Promise<void> {
    const data: NotificationDelivery = {
      notification_id: job.id,
      event: job.event,
      source: job.source,
      execution_id: job.execution_id,
      channel: job.channel,
      target: job.target,
      attempts: tries,
      status_code: result.status_code,
      error_message: result.ok ? null : result.error,
    };
    const type = result.ok ? 'NotificationSent' : 'NotificationFailed';
    const event = {
      type,
      id: `${job.id}.${job.channel}.${result.ok ? 'sent' : 'failed'}`,
      at: new Date(deps.clock.now()).toISOString(),
      org_id: job.org_id,
      data,
    } as NotificationEvent;
    await deps.store.append(SUBJECTS.notification(job.org_id, job.id), event);
  }

  /** One delivery as a CONSUMER span, continuing the trace of the outcome that caused it (NOTIFY message header). */
  async function handle(msg: JsMsg, handedBack: () => boolean): Promise<void> {
    const job = decodeJson<NotificationJob>(msg.data);
    return inSpan(`notify ${job.event}`, {
      kind: SpanKind.CONSUMER, traceparent: traceparentOf(msg),
      attributes: () => ({ 'jetcron.org_id': job.org_id, 'jetcron.notification_id': job.id, 'jetcron.channel': job.channel }),
    }, () => deliver(msg, job, handedBack));
  }

  async function deliver(msg: JsMsg, job: NotificationJob, handedBack: () => boolean): Promise<void> {
    // Every redelivery counts as a try, whether a retry we asked for or one after a crash.
    const tries = Math.max(1, msg.info.deliveryCount);
    const result = job.channel === 'email' ? await sendEmail(job) : await sendWebhook(job);
    if (!result.ok && !result.final && tries < NOTIFY_MAX_TRIES) {
      const delay = deps.clock.wait(NOTIFY_RETRY_DELAYS_MS[Math.min(tries, NOTIFY_RETRY_DELAYS_MS.length) - 1]!);
      deps.log(`notifier: ${job.event} ${job.id} to ${job.channel} failed (try ${tries}): ${result.error}; again in ${delay} ms`);
      if (!handedBack()) msg.nak(Math.max(delay, 1));
      deps.onTry?.(job.channel, 'retried');
      return;
    }
    if (!result.ok) deps.log(`notifier: ${job.event} ${job.id} to ${job.channel} given up after ${tries} tries: ${result.error}`);
    await record(job, result, tries);
    if (!handedBack()) msg.ack();
    deps.onTry?.(job.channel, result.ok ? 'sent' : 'failed');
  }

  const work = consumeWork({
    nats: deps.nats,
    stream: CONSUMERS.notifiers.stream,
    durable: CONSUMERS.notifiers.durable_name,
    concurrency: deps.concurrency,
    supervisor: deps.supervisor,
    log: deps.log,
    handle,
  });

  return {
    /** Stops taking deliveries; in-flight ones get `graceMs`, then go back to the stream. */
    stop: (graceMs = 10_000) => work.stop(graceMs),
  };
}
