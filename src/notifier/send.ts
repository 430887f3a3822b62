import type { OutboundResult } from '../commands/execution/exchange.ts';
import { signingSecrets } from '../commands/organization/decide.ts';
import type { OutboundClient } from '../dispatchers/outbound-client.ts';
import { signedHeaders } from '../dispatchers/signing.ts';
import type { Clock } from '../lib/clock.ts';
import type { Directory } from '../nats/org-directory.ts';
import { tracedSend } from '../dispatchers/traced-send.ts';

/** What one try of a delivery ended with; `final`: trying again will not help. */
export type TryResult = { ok: true; status_code: number | null } | { ok: false; final: boolean; status_code: number | null; error: string };

/** A notification's request waits at most this long for its answer. */
export const NOTIFY_TIMEOUT_MS = 10_000;

/**
 * An answer as a try's result: 2xx delivered. `permanent4xx`: a 4xx other than 408 and
 * 429 is final (a vendor refusing a token or a payload refuses it again); a refused or
 * invalid URL always is.
 */
export function tryResultOf(r: OutboundResult, permanent4xx: boolean): TryResult {
  if (r.kind === 'response') {
    const code = r.statusCode;
    if (code >= 200 && code < 300) return { ok: true, status_code: code };
    const final = permanent4xx && code >= 400 && code < 500 && code !== 408 && code !== 429;
    return { ok: false, final, status_code: code, error: `HTTP ${code}` };
  }
  return { ok: false, final: r.error === 'refused_target' || r.error === 'invalid_url', status_code: null, error: r.message };
}

export interface SignedPost {
  orgId: string;
  url: string;
  body: string;
  event: string;
  /** `webhook-id` and `X-Jetcron-Notification-Id`. */
  notificationId: string;
  /** Signed and sent as X-Jetcron-Execution-Id: the execution id, else the notification id. */
  signingId: string;
  taskId?: string | undefined;
}

/** A notification webhook: POSTed JSON signed with the organization's webhook secret (X-Jetcron-* and Standard Webhooks). */
export async function sendSigned(
  deps: { outbound: Pick<OutboundClient, 'send'>; directory: Pick<Directory, 'organization'>; clock: Clock },
  post: SignedPost,
  permanent4xx = false,
): Promise<TryResult> {
  const org = await deps.directory.organization(post.orgId);
  if (!org) return { ok: false, final: true, status_code: null, error: `organization ${post.orgId} not found` };
  const nowMs = deps.clock.now();
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': 'jetcron-notifier',
    'X-Jetcron-Event': post.event,
    'X-Jetcron-Notification-Id': post.notificationId,
    ...signedHeaders({ secrets: signingSecrets(org, nowMs), taskId: post.taskId, executionId: post.signingId, webhookId: post.notificationId, body: post.body, nowMs }),
  };
  const r = await tracedSend(deps.outbound, { url: post.url, method: 'POST', headers, body: post.body, timeoutMs: NOTIFY_TIMEOUT_MS });
  return tryResultOf(r, permanent4xx);
}
