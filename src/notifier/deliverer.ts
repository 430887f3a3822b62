import type { JsMsg } from '@nats-io/jetstream';
import { CONSUMERS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { NotificationChannel, NotificationDelivery, NotificationEvent } from '../commands/notification/types.ts';
import type { OutboundClient } from '../dispatchers/outbound-client.ts';
import type { EventStore } from '../commands/store.ts';
import type { Clock } from '../lib/clock.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { consumeWork } from '../nats/work-consumer.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { Mailer } from './mailer.ts';
import { deliveryKey, type NotificationJob } from './plan.ts';
import { traceparentOf } from '../nats/follow.ts';
import { inSpan, SpanKind } from '../telemetry/tracing.ts';
import { sendSigned, type TryResult } from './send.ts';
import type { ChannelSender } from './channels/send.ts';
import { RECEIVER_DEDUPES } from './channels/formats.ts';
import type { SendLedger } from './send-ledger.ts';

/** Waits before the 2nd and 3rd try (scaled by JETCRON_TIME_SCALE): 3 tries in all. */
export const NOTIFY_RETRY_DELAYS_MS = [5_000, 20_000] as const;
export const NOTIFY_MAX_TRIES = NOTIFY_RETRY_DELAYS_MS.length + 1;

export interface DelivererDeps {
  nats: Nats;
  store: EventStore;
  directory: Directory;
  outbound: OutboundClient;
  mailer: Mailer | null;
  /** Sends to the organizations' notification channels. */
  channels: ChannelSender;
  /** Where each delivery stands across crashes (KV `notify-sends`). */
  ledger: SendLedger;
  clock: Clock;
  concurrency: number;
  log: (m: string) => void;
  supervisor: Supervisor;
  /** After each try: `retried` = failed, handed back for another; `failed` = given up. */
  onTry?: (channel: NotificationChannel, result: 'sent' | 'retried' | 'failed') => void;
}

/** A try a crash cut short, as its delivery records it: not sent again, so it cannot arrive twice. */
const interrupted = (tried: number): TryResult => ({
  ok: false, final: true, status_code: null,
  error: `the notifier stopped while try ${tried} was being sent; it is not sent again, so that it cannot arrive twice`,
});

/**
 * Delivers notifications from NOTIFY (durable consumer `notifiers`, shared by every
 * notifier process): signs and POSTs webhooks with the outbound client (SSRF guard
 * included), sends email through SMTP, and each channel's message in its vendor's
 * format (`channels/`). A failed try is handed back with `nak(delay)` (5 s, then 20 s,
 * scaled); the result (`NotificationSent` or, after the last try, `NotificationFailed`)
 * is appended to `evt.<org>.notify.<id>` before the ack. A slow or dead target holds
 * one of `concurrency` slots for at most its timeout and then waits in the stream, so
 * it never holds up other notifications.
 *
 * Each try is marked in the send ledger before its request leaves and after it comes
 * back: a delivery redelivered after a crash that finds its try still `sending` is not
 * sent again (the receiver may have it) unless the receiver folds repeats itself
 * (PagerDuty, Opsgenie); one that finds it `ended` only records and acks.
 */
export function startDeliverer(deps: DelivererDeps) {
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

  function send(job: NotificationJob): Promise<TryResult> {
    const ids = { notificationId: job.id, signingId: job.signing_id, taskId: job.source.type === 'task' ? job.source.id : undefined };
    switch (job.channel) {
      case 'email':
        return sendEmail(job);
      case 'channel':
        if (!job.to_channel || !job.message) return Promise.resolve({ ok: false, final: true, status_code: null, error: 'the delivery names no channel' });
        return deps.channels(job.to_channel, job.message, ids);
      case 'org_webhook':
      case 'source_webhook':
        return sendSigned(deps, { orgId: job.org_id, url: job.target, body: job.body ?? '', event: job.event, ...ids });
    }
  }

  async function record(job: NotificationJob, result: TryResult, tries: number): Promise<void> {
    const data: NotificationDelivery = {
      notification_id: job.id,
      event: job.event,
      source: job.source,
      execution_id: job.execution_id,
      channel: job.channel,
      ...(job.to_channel ? { channel_id: job.to_channel.id, channel_kind: job.to_channel.kind } : {}),
      target: job.target,
      attempts: tries,
      status_code: result.status_code,
      error_message: result.ok ? null : result.error,
    };
    const type = result.ok ? 'NotificationSent' : 'NotificationFailed';
    const event = {
      type,
      id: `${job.id}.${deliveryKey(job)}.${result.ok ? 'sent' : 'failed'}`,
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
      attributes: () => ({ 'jetcron.org_id': job.org_id, 'jetcron.notification_id': job.id, 'jetcron.channel': deliveryKey(job) }),
    }, () => deliver(msg, job, handedBack));
  }

  const label = (job: NotificationJob) => `${job.event} ${job.id} to ${deliveryKey(job)}`;

  async function finish(msg: JsMsg, job: NotificationJob, result: TryResult, tries: number, handedBack: () => boolean): Promise<void> {
    await record(job, result, tries);
    if (!handedBack()) msg.ack();
    deps.onTry?.(job.channel, result.ok ? 'sent' : 'failed');
  }

  async function deliver(msg: JsMsg, job: NotificationJob, handedBack: () => boolean): Promise<void> {
    // Every redelivery counts as a try, whether a retry we asked for or one after a crash.
    const tries = Math.max(1, msg.info.deliveryCount);
    const key = `${job.id}.${deliveryKey(job)}`;
    const known = await deps.ledger.get(key);
    const was = known.value;
    if (was?.state === 'ended') return finish(msg, job, was.result, was.tries, handedBack);
    if (was?.state === 'sending' && !(job.to_channel && RECEIVER_DEDUPES.has(job.to_channel.kind))) {
      const result = interrupted(was.try);
      deps.log(`notifier: ${label(job)}: ${result.ok ? '' : result.error}`);
      if ((await deps.ledger.put(key, { state: 'ended', tries: was.try, result }, known.revision)) === false) return;
      return finish(msg, job, result, was.try, handedBack);
    }
    const claimed = await deps.ledger.put(key, { state: 'sending', try: tries }, known.revision);
    // Another copy of this delivery (one redelivered while this one was slow) has it.
    if (claimed === false) return;
    const result = await send(job);
    if (!result.ok && !result.final && tries < NOTIFY_MAX_TRIES) {
      if ((await deps.ledger.put(key, { state: 'waiting', try: tries }, claimed)) === false) return;
      const delay = deps.clock.wait(NOTIFY_RETRY_DELAYS_MS[Math.min(tries, NOTIFY_RETRY_DELAYS_MS.length) - 1]!);
      deps.log(`notifier: ${label(job)} failed (try ${tries}): ${result.error}; again in ${delay} ms`);
      if (!handedBack()) msg.nak(Math.max(delay, 1));
      deps.onTry?.(job.channel, 'retried');
      return;
    }
    if (!result.ok) deps.log(`notifier: ${label(job)} given up after ${tries} tries: ${result.error}`);
    if ((await deps.ledger.put(key, { state: 'ended', tries, result }, claimed)) === false) return;
    await finish(msg, job, result, tries, handedBack);
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
