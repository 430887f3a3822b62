import type { Envelope } from '../envelope.ts';
import type { SealedSecrets } from '../../lib/sealed-secrets.ts';
import type { FlowControl, FlowControlInput } from '../flow-control/types.ts';
import type { FailureStreak, FinalRun } from '../destination-health.ts';

/** An endpoint's flow control for its forwards: the key is the endpoint. */
export type EndpointFlowControl = Omit<FlowControl, 'key'>;

/** What a user sets on an endpoint (the spec's Endpoint table, plus the notification flags every resource has). */
export interface EndpointSpec {
  name: string;
  /** Empty = collect-only: events are stored, nothing is forwarded. */
  forward_urls: string[];
  retry_attempts: number;
  use_lane: boolean;
  enabled: boolean;
  /** Custom forwarding; null = the inbound request's own value. */
  forward_method: string | null;
  forward_headers: Record<string, string> | null;
  forward_body: string | null;
  on_failure_url: string | null;
  on_recovery_url: string | null;
  notify_on_failure: boolean | null;
  notify_on_recovery: boolean | null;
  /** The organization's channels this resource notifies: null (or absent, before channels) = every one, [] = none. */
  channels?: string[] | null;
  script: string | null;
  /**
   * A verification preset checked on every inbound request; its secret is kept sealed
   * on the endpoint. Absent in events written before presets: none.
   */
  verification?: Verification | null;
  /**
   * Limits on its forwards (the contract's "Flow control"): `rate` combines with
   * `use_lane`, `parallelism` needs `use_lane: false`. Absent in events written before
   * flow control: none.
   */
  flow_control?: EndpointFlowControl | null;
}

/** The contract's inbound verification presets. */
export const VERIFICATION_TYPES = ['standard-webhooks', 'stripe', 'github', 'shopify', 'hmac'] as const;
export type VerificationType = (typeof VERIFICATION_TYPES)[number];

/** A verification preset as stored and shown: everything but its secret. `header` … `prefix` are `hmac`'s only. */
export interface Verification {
  type: VerificationType;
  header?: string;
  algorithm?: 'sha256' | 'sha1';
  encoding?: 'hex' | 'base64';
  prefix?: string;
}

export interface Endpoint extends EndpointSpec {
  id: string;
  org_id: string;
  /** The inbound URL's credential: `ep_` + 32 characters; distinct from the id. */
  slug: string;
  paused: boolean;
  /** Names only; the values are in `sealed_secrets`, encrypted. */
  secret_names: string[];
  sealed_secrets: SealedSecrets | null;
  /** The verification preset's secret, sealed as `{secret}`; absent in events written before presets. */
  sealed_verification_secret?: SealedSecrets | null;
  created_at: string;
  updated_at: string;
  /**
   * Destination health of its forward URLs (`src/commands/destination-health.ts`): one
   * entry per URL that ever had a final result counted; a URL without one is active
   * with no failures (`forwardHealthOf`). Absent in events written before it: none.
   */
  forward_health?: ForwardState[];
}

/** One forward URL's health as the endpoint holds it. */
export interface ForwardState extends FailureStreak {
  url: string;
  status: 'active' | 'disabled';
  disabled_at: string | null;
}

/** One forward URL's health as responses show it (CONTRACT.md "Destination health"). */
export type ForwardHealth = Pick<ForwardState, 'url' | 'status' | 'failing_since' | 'consecutive_failures' | 'disabled_at'>;

/** Every forward URL's health, in `forward_urls` order; a URL never counted is active with no failures. */
export function forwardHealthOf(e: Pick<Endpoint, 'forward_urls' | 'forward_health'>): ForwardHealth[] {
  return e.forward_urls.map((url) => {
    const s = e.forward_health?.find((h) => h.url === url);
    return { url, status: s?.status ?? 'active', failing_since: s?.failing_since ?? null, consecutive_failures: s?.consecutive_failures ?? 0, disabled_at: s?.disabled_at ?? null };
  });
}

/** Whether deliveries to `url` are held back: the URL was disabled by destination health. */
export const forwardDisabled = (e: Pick<Endpoint, 'forward_health'> | null | undefined, url: string): boolean =>
  e?.forward_health?.some((h) => h.url === url && h.status === 'disabled') ?? false;

/** Secrets as a command carries them: already sealed by the handler, so deciders stay pure. */
export interface SecretsChange {
  names: string[];
  sealed: SealedSecrets | null;
}

export type EndpointInput = Partial<Omit<EndpointSpec, 'flow_control'>> & { flow_control?: Omit<FlowControlInput, 'key'> | null };

export type EndpointEvent =
  | Envelope<'EndpointCreated', { endpoint: Endpoint }>
  | Envelope<'EndpointUpdated', { endpoint: Endpoint; changed: string[] }>
  | Envelope<'EndpointDeleted', { endpoint: Endpoint }>
  | Envelope<'EndpointPaused', { endpoint: Endpoint }>
  | Envelope<'EndpointResumed', { endpoint: Endpoint }>
  /** Destination health: a delivery to `url` ended failed or timed out after its last attempt (counted once). */
  | Envelope<'EndpointForwardFailureCounted', { endpoint: Endpoint; url: string; execution_id: string }>
  /** Destination health: a delivery to `url` succeeded after failures; its count starts again. */
  | Envelope<'EndpointForwardFailuresReset', { endpoint: Endpoint; url: string; execution_id: string }>
  /** Destination health: `url` failed long enough and often enough: nothing is sent to it until it is enabled. */
  | Envelope<'EndpointForwardDisabled', { endpoint: Endpoint; url: string; execution_id: string; execution?: FinalRun }>
  /** `POST /endpoints/{id}/forwards/enable`: `url` is active again; `recover_since` when a replay job was asked for. */
  | Envelope<'EndpointForwardEnabled', { endpoint: Endpoint; url: string; recover_since: string | null }>;

export const ENDPOINT_EVENT_TYPES: ReadonlySet<string> = new Set<EndpointEvent['type']>([
  'EndpointCreated', 'EndpointUpdated', 'EndpointDeleted', 'EndpointPaused', 'EndpointResumed',
  'EndpointForwardFailureCounted', 'EndpointForwardFailuresReset', 'EndpointForwardDisabled', 'EndpointForwardEnabled',
]);

export const ENDPOINT_DEFAULTS: Omit<EndpointSpec, 'name'> = {
  forward_urls: [],
  retry_attempts: 5,
  use_lane: true,
  flow_control: null,
  enabled: true,
  forward_method: null,
  forward_headers: null,
  forward_body: null,
  on_failure_url: null,
  on_recovery_url: null,
  notify_on_failure: null,
  notify_on_recovery: null,
  script: null,
  verification: null,
};

export const MAX_FORWARD_URLS = 10;
