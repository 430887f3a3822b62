import type { Channel } from '../../commands/channel/types.ts';
import type { OutboundClient } from '../../dispatchers/outbound-client.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Sealer } from '../../lib/sealed-secrets.ts';
import type { Directory } from '../../nats/org-directory.ts';
import { tracedSend } from '../../dispatchers/traced-send.ts';
import type { Mailer } from '../mailer.ts';
import { NOTIFY_TIMEOUT_MS, sendSigned, tryResultOf, type TryResult } from '../send.ts';
import { FORMATS } from './formats.ts';
import type { ChannelMessage } from './message.ts';
import type { ChannelRequest } from './request.ts';

export interface ChannelSenderDeps {
  outbound: Pick<OutboundClient, 'send'>;
  /** null: no SMTP_URL, email channels fail. */
  mailer: Mailer | null;
  box: Sealer;
  directory: Pick<Directory, 'organization'>;
  clock: Clock;
}

/** The ids a delivery is signed and named with (kind `webhook`): the notification's, and its execution's when it has one. */
export interface DeliveryIds {
  notificationId: string;
  signingId: string;
  taskId?: string | undefined;
}

/** Each secret's text (and its URL-encoded form) replaced by `***`: what an error, a span or a log line may say. */
export function redactor(secrets: readonly string[]): (text: string) => string {
  const forms = [...new Set(secrets.flatMap((s) => [s, encodeURIComponent(s)]).filter((s) => s.length >= 4))].sort((a, b) => b.length - a.length);
  return (text) => forms.reduce((t, s) => t.split(s).join('***'), text);
}

/**
 * Sends a message to a channel now: opens its secrets, writes the vendor's requests
 * (`formats.ts`) and sends them in order through the outbound client (its guard against
 * private addresses included), each with the notifications' timeout; the first that
 * fails ends the delivery. What it answers never holds a secret of the channel.
 */
export function createChannelSender(deps: ChannelSenderDeps) {
  async function one(r: ChannelRequest, orgId: string, event: string, ids: DeliveryIds, hide: (t: string) => string): Promise<TryResult> {
    switch (r.type) {
      case 'http': {
        const out = await tracedSend(deps.outbound, { url: r.url, method: r.method, headers: { 'User-Agent': 'jetcron-notifier', ...r.headers }, body: r.body, timeoutMs: NOTIFY_TIMEOUT_MS }, hide(r.url));
        return tryResultOf(out, true);
      }
      case 'signed':
        return sendSigned(deps, { orgId, url: r.url, body: r.body, event, ...ids }, true);
      case 'email': {
        if (!deps.mailer) return { ok: false, final: true, status_code: null, error: 'email is off on this notifier (no SMTP_URL)' };
        try {
          await deps.mailer.send({ to: r.to, subject: r.subject, text: r.text });
          return { ok: true, status_code: null };
        } catch (err) {
          const e = err as { message?: string; responseCode?: number };
          return { ok: false, final: typeof e.responseCode === 'number' && e.responseCode >= 500, status_code: null, error: e.message ?? String(err) };
        }
      }
    }
  }

  return async function send(channel: Channel, message: ChannelMessage, ids: DeliveryIds): Promise<TryResult> {
    let secrets: Record<string, string>;
    try {
      secrets = deps.box.open(channel.sealed_secrets);
    } catch (err) {
      return { ok: false, final: true, status_code: null, error: `the channel's secrets cannot be opened: ${(err as Error).message}` };
    }
    const hide = redactor(Object.values(secrets));
    const requests = FORMATS[channel.kind](message, { ...channel.config, ...secrets });
    let result: TryResult = { ok: true, status_code: null };
    for (const r of requests) {
      result = await one(r, channel.org_id, message.event, ids, hide);
      if (!result.ok) return { ...result, error: hide(result.error) };
    }
    return result;
  };
}

export type ChannelSender = ReturnType<typeof createChannelSender>;
