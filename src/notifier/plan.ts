import { createHash } from 'node:crypto';
import type { NotificationChannel, NotificationEventName, NotifySourceType } from '../commands/notification/types.ts';
import type { Channel } from '../commands/channel/types.ts';
import { channelMessage, type ChannelMessage } from './channels/message.ts';
import type { Organization } from '../commands/organization/types.ts';
import { emailMessage, eventName, webhookPayload, type ExecutionSummary, type NotifySource } from './message.ts';
import type { Transition } from './state.ts';

/** One delivery to one channel: a message on the NOTIFY stream. */
export interface NotificationJob {
  /** `ntf_…`, the same for every channel of one notification. */
  id: string;
  org_id: string;
  event: NotificationEventName;
  channel: NotificationChannel;
  source: { type: NotifySourceType; id: string; name: string };
  execution_id: string | null;
  /** Signed and sent as X-Jetcron-Execution-Id: the execution id, else the notification id. */
  signing_id: string;
  /** A URL for webhooks, an address for email. */
  target: string;
  /** Webhooks: the JSON text that is signed and sent. */
  body?: string;
  /** Email. */
  subject?: string;
  text?: string;
  /**
   * `channel`: the channel as it was when the notification was decided, its secrets
   * sealed (nothing in NOTIFY holds one in the clear), and what it is told.
   */
  channel_id?: string;
  to_channel?: Channel;
  message?: ChannelMessage;
  created_at: string;
}

/** Which delivery of a notification this is: the channel's id, or the organization's or the resource's own. */
export const deliveryKey = (job: Pick<NotificationJob, 'channel' | 'channel_id'>) => job.channel_id ?? job.channel;

/** Msg id on NOTIFY: deciding the same transition again (a replay) publishes nothing new. */
export const notifyMsgId = (job: Pick<NotificationJob, 'id' | 'channel' | 'channel_id'>) => `${job.id}:${deliveryKey(job)}`;

/**
 * The organization's channels that hear this notification: the resource's `channels`
 * (null = every one) and each channel's `events` (null = every event) both say so;
 * email channels only where this notifier has SMTP.
 */
export function channelsFor(channels: readonly Channel[], source: Pick<NotifySource, 'channels'>, event: NotificationEventName, emailEnabled: boolean): Channel[] {
  const named = source.channels ?? null;
  return channels.filter((c) => (named === null || named.includes(c.id)) && (c.events === null || c.events.includes(event)) && (c.kind !== 'email' || emailEnabled));
}

/** The resource's own URL for this transition: on_failure_url, on_recovery_url; none for being disabled. */
const ownUrl = (source: NotifySource, transition: Transition): string | null =>
  transition === 'failed' ? source.on_failure_url : transition === 'recovered' ? source.on_recovery_url : null;

/**
 * Whether the organization's channels (its webhook and email) hear about this
 * transition: the resource's flag when set, else the organization's.
 */
export function organizationWants(source: NotifySource, org: Organization, transition: Transition): boolean {
  // Being disabled is news of a failure: the failure flag decides.
  return transition === 'recovered'
    ? (source.notify_on_recovery ?? org.notify_on_recovery)
    : (source.notify_on_failure ?? org.notify_on_failure);
}

/**
 * Whether a transition makes any delivery (`planNotifications` returns some): checked
 * first, so a transition nobody hears about costs no notification id, payload or job.
 */
export function notifies(source: NotifySource, org: Organization, transition: Transition, emailEnabled: boolean, channels: readonly Channel[] = []): boolean {
  if (ownUrl(source, transition)) return true;
  if (!organizationWants(source, org, transition)) return false;
  return !!(org.notification_webhook_url || (org.notification_email && emailEnabled)) || channelsFor(channels, source, eventName(source.type, transition), emailEnabled).length > 0;
}

/**
 * The deliveries one transition makes:
 * - the organization webhook and email, when `organizationWants` says so and they are set
 *   (email only when this notifier has SMTP);
 * - the resource's own `on_failure_url` / `on_recovery_url`, whenever set: setting one is
 *   the resource's own opt-in, so the notify flags (which choose what the organization's
 *   channels hear) do not silence it.
 */
export function planNotifications(input: {
  id: string;
  transition: Transition;
  source: NotifySource;
  org: Organization;
  execution: ExecutionSummary | null;
  emailEnabled: boolean;
  now: number;
  /** The organization's channels, and what their messages link to and say happened when. */
  channels?: readonly Channel[];
  rootUrl?: string;
  at?: string;
}): NotificationJob[] {
  const { id, transition, source, org, execution } = input;
  const base = {
    id,
    org_id: org.id,
    event: eventName(source.type, transition),
    source: { type: source.type, id: source.id, name: source.name },
    execution_id: execution?.id ?? null,
    signing_id: execution?.id ?? id,
    created_at: new Date(input.now).toISOString(),
  };
  const jobs: NotificationJob[] = [];
  if (organizationWants(source, org, transition)) {
    if (org.notification_webhook_url) {
      const body = JSON.stringify(webhookPayload(source, transition, execution, true));
      jobs.push({ ...base, channel: 'org_webhook', target: org.notification_webhook_url, body });
    }
    if (org.notification_email && input.emailEnabled) {
      jobs.push({ ...base, channel: 'email', target: org.notification_email, ...emailMessage(source, transition, execution) });
    }
    const hearing = channelsFor(input.channels ?? [], source, base.event, input.emailEnabled);
    if (hearing.length) {
      const message = channelMessage({ source, transition, execution, at: input.at ?? base.created_at, rootUrl: input.rootUrl ?? '' });
      for (const c of hearing) jobs.push({ ...base, channel: 'channel', channel_id: c.id, target: `${c.kind} ${c.id}`, to_channel: c, message });
    }
  }
  const own = ownUrl(source, transition);
  if (own) {
    jobs.push({ ...base, channel: 'source_webhook', target: own, body: JSON.stringify(webhookPayload(source, transition, execution, false)) });
  }
  return jobs;
}

/**
 * The notification id of a transition an execution made: derived from the execution
 * id, so deciding it again gives the same id (an execution ends for good once).
 */
export function notificationIdFor(executionId: string): string {
  const m = /^[a-z]+_([0-9a-z]{10,40})$/.exec(executionId);
  return `ntf_${m ? m[1] : createHash('sha256').update(executionId).digest('hex').slice(0, 32)}`;
}
