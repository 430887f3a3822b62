import { notFound, unprocessable } from '../../lib/errors.ts';
import { checkResourceChannels } from '../channel/decide.ts';
import { randomToken } from '../../lib/ids.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import type { Plan } from '../organization/types.ts';
import { checkBodySize, checkHeaders, checkLength, checkRange, checkUrl, emptyAsNone, MAX_NAME_LENGTH, RETRY_ATTEMPTS } from '../payload-checks.ts';
import { checkPlanFeatures } from '../plan-rules.ts';
import { checkFlowControl, normalizeLimits } from '../flow-control/rules.ts';
import type { SealedSecrets } from '../../lib/sealed-secrets.ts';
import { ENDPOINT_DEFAULTS, MAX_FORWARD_URLS, VERIFICATION_TYPES, type Endpoint, type EndpointEvent, type EndpointInput, type EndpointSpec, type ForwardState, type SecretsChange, type Verification } from './types.ts';
import { NO_STREAK, stepStreak, type FinalResult } from '../destination-health.ts';

// `plan`: the organization's, for the fields only some plans have.
// `verificationSecret`: the secret of `input.verification`, sealed by the handler (null when the input gave none).
export type EndpointCommand =
  | { type: 'CreateEndpoint'; orgId: string; plan: Plan; input: EndpointInput & { name: string }; secrets: SecretsChange | null; verificationSecret?: SealedSecrets | null }
  | { type: 'UpdateEndpoint'; plan: Plan; input: EndpointInput; secrets: SecretsChange | null; verificationSecret?: SealedSecrets | null }
  | { type: 'DeleteEndpoint' }
  | { type: 'PauseEndpoint' }
  | { type: 'ResumeEndpoint' }
  /** Destination health: a delivery to `url` ended for good (the counting reader, `src/notifier/health.ts`). */
  | { type: 'CountForwardResult'; url: string; result: FinalResult }
  /** `POST /endpoints/{id}/forwards/enable`. */
  | { type: 'EnableForward'; url: string; recoverSince: string | null };

export function evolveEndpoint(_state: Endpoint | null, event: EndpointEvent): Endpoint | null {
  switch (event.type) {
    case 'EndpointCreated':
    case 'EndpointUpdated':
    case 'EndpointPaused':
    case 'EndpointResumed':
    case 'EndpointForwardFailureCounted':
    case 'EndpointForwardFailuresReset':
    case 'EndpointForwardDisabled':
    case 'EndpointForwardEnabled':
      return event.data.endpoint;
    case 'EndpointDeleted':
      return null;
    default:
      return unreachable(event);
  }
}

const strip = <T extends object>(o: T) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/**
 * Fields whose empty text means none (see `emptyAsNone`): the spec's empty
 * forward_method and forward_body (the original is forwarded), no notification URL, no script.
 */
const ENDPOINT_EMPTY_AS_NONE = ['forward_method', 'forward_body', 'on_failure_url', 'on_recovery_url', 'script'] as const;

/** The spec: an empty forward_method, forward_headers or forward_body means the original is forwarded. */
function normalize(input: EndpointInput): Partial<EndpointSpec> {
  const { flow_control, ...out } = strip(input);
  if (out.forward_headers && Object.keys(out.forward_headers).length === 0) out.forward_headers = null;
  return flow_control === undefined ? out : { ...out, flow_control: flow_control && normalizeLimits(flow_control) };
}

function checkRules(spec: EndpointSpec): void {
  checkLength(spec.name, 'name', MAX_NAME_LENGTH, 1);
  checkRange(spec.retry_attempts, 'retry_attempts', RETRY_ATTEMPTS);
  for (const field of ['on_failure_url', 'on_recovery_url'] as const) checkUrl(spec[field], field);
  checkResourceChannels(spec.channels);
  if (spec.forward_urls.length > MAX_FORWARD_URLS) throw unprocessable(`forward_urls must NOT have more than ${MAX_FORWARD_URLS} items`, 'forward_urls');
  const seen = new Set<string>();
  spec.forward_urls.forEach((url, i) => {
    checkUrl(url, `forward_urls[${i}]`);
    if (seen.has(url)) throw unprocessable(`forward_urls[${i}] repeats ${url}`, `forward_urls[${i}]`);
    seen.add(url);
  });
  // A lane is one at a time: a parallelism would say otherwise.
  if (spec.use_lane && spec.flow_control?.parallelism != null) {
    throw unprocessable('flow_control.parallelism needs use_lane: false (a lane forwards one at a time; its rate may be limited)', 'flow_control.parallelism');
  }
}

const HMAC_FIELDS = ['header', 'algorithm', 'encoding'] as const;

/**
 * A preset on every plan: its secret always (write-only, so an update that changes the
 * preset gives it again); `hmac` names its header, algorithm and encoding, the other
 * types have fixed ones and take none of these.
 */
function checkVerification(v: Verification | null | undefined, secret: SealedSecrets | null | undefined): void {
  if (!v) return;
  const field = (name: string) => `verification.${name}`;
  if (!VERIFICATION_TYPES.includes(v.type)) throw unprocessable(`verification.type must be one of ${VERIFICATION_TYPES.join(', ')}`, field('type'));
  if (!secret) throw unprocessable('verification.secret is required', field('secret'));
  if (v.type === 'hmac') {
    for (const name of HMAC_FIELDS) if (v[name] === undefined) throw unprocessable(`verification.${name} is required for type hmac`, field(name));
    return;
  }
  for (const name of [...HMAC_FIELDS, 'prefix'] as const) {
    if (v[name] !== undefined) throw unprocessable(`verification.${name} applies only to type hmac (${v.type} has its own)`, field(name));
  }
}

/** The plan's features, then what JSON Schema cannot say about the custom forwarding and the verification preset. */
function checkInput(command: Extract<EndpointCommand, { input: EndpointInput }>): void {
  const { input } = command;
  checkPlanFeatures(command.plan, { script: input.script, secrets: command.secrets?.names });
  checkBodySize(input.forward_body, 'forward_');
  checkHeaders(input.forward_headers ?? undefined, 'forward_');
  checkVerification(input.verification, command.verificationSecret);
  checkFlowControl(input.flow_control, { needsKey: false });
}

/** The sealed secret that goes with the input's preset: replaced with it, cleared with it, else kept. */
const verificationSecretOf = (command: Extract<EndpointCommand, { input: EndpointInput }>) =>
  command.input.verification === undefined ? {} : { sealed_verification_secret: command.input.verification ? command.verificationSecret! : null };

/** The endpoint with one forward URL's health replaced. */
const withForward = (e: Endpoint, state: ForwardState): Endpoint =>
  ({ ...e, forward_health: [...(e.forward_health ?? []).filter((h) => h.url !== state.url), state] });

/**
 * Destination health (CONTRACT.md) of one forward URL: a final result of a delivery to
 * it counted, once (`stepStreak` passes over a result at or below the URL's
 * `counted_seq`). A URL no longer among `forward_urls`, or already disabled, counts
 * nothing. The failure that makes the run long and frequent enough disables the URL.
 */
function countForwardResult(url: string, result: FinalResult, state: Endpoint | null, meta: CommandMeta): EndpointEvent[] {
  if (!state || !state.forward_urls.includes(url)) return [];
  const known = state.forward_health?.find((h) => h.url === url);
  if (known?.status === 'disabled') return [];
  const step = stepStreak(known ?? NO_STREAK, result);
  if (!step) return [];
  const base = { at: meta.now, org_id: state.org_id, id: `${state.id}.health.${result.executionId}` };
  const data = (status: ForwardState['status']) => ({
    endpoint: withForward(state, { url, status, ...step.streak, disabled_at: status === 'disabled' ? result.at : null }),
    url,
    execution_id: result.executionId,
  });
  switch (step.kind) {
    case 'counted':
      return [{ ...base, type: 'EndpointForwardFailureCounted', data: data('active') }];
    case 'reset':
      return [{ ...base, type: 'EndpointForwardFailuresReset', data: data('active') }];
    case 'disable':
      return [{ ...base, type: 'EndpointForwardDisabled', data: { ...data('disabled'), ...(result.run ? { execution: result.run } : {}) } }];
    default:
      return unreachable(step);
  }
}

/** A forward URL made active again, its failures counted afresh; an active one stays as it is (no event). */
function enableForward(url: string, recoverSince: string | null, state: Endpoint, meta: CommandMeta): EndpointEvent[] {
  if (!state.forward_urls.includes(url)) throw unprocessable(`url: ${url} is not a forward URL of this endpoint`, 'url');
  const known = state.forward_health?.find((h) => h.url === url);
  if (known?.status !== 'disabled') return [];
  const endpoint = withForward({ ...state, updated_at: meta.now }, { url, status: 'active', ...NO_STREAK, counted_seq: known.counted_seq, disabled_at: null });
  return [{ id: meta.eventId, at: meta.now, org_id: state.org_id, type: 'EndpointForwardEnabled', data: { endpoint, url, recover_since: recoverSince } }];
}

export function decideEndpoint(command: EndpointCommand, state: Endpoint | null, meta: CommandMeta): EndpointEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  if (command.type === 'CreateEndpoint' || command.type === 'UpdateEndpoint') {
    command = { ...command, input: emptyAsNone(command.input, ENDPOINT_EMPTY_AS_NONE) } as typeof command;
    // Before anything else, "not found" included: a refused input answers the same whatever the endpoint.
    checkInput(command);
  }
  if (command.type === 'CreateEndpoint') {
    const spec: EndpointSpec = { ...ENDPOINT_DEFAULTS, ...normalize(command.input), name: command.input.name };
    checkRules(spec);
    const endpoint: Endpoint = {
      ...spec,
      id: meta.newId('ep'),
      org_id: command.orgId,
      slug: `ep_${randomToken(32)}`,
      paused: false,
      secret_names: command.secrets?.names ?? [],
      sealed_secrets: command.secrets?.sealed ?? null,
      sealed_verification_secret: null,
      ...verificationSecretOf(command),
      created_at: meta.now,
      updated_at: meta.now,
    };
    return [{ ...base, type: 'EndpointCreated', org_id: command.orgId, data: { endpoint } }];
  }
  if (command.type === 'CountForwardResult') return countForwardResult(command.url, command.result, state, meta);
  if (!state) throw notFound('Endpoint not found');
  const org_id = state.org_id;
  const at = { updated_at: meta.now };
  switch (command.type) {
    case 'UpdateEndpoint': {
      const input = normalize(command.input);
      const spec: EndpointSpec = { ...state, ...input };
      checkRules(spec);
      const secrets = command.secrets ? { secret_names: command.secrets.names, sealed_secrets: command.secrets.sealed } : {};
      const changed = [...Object.keys(command.input), ...(command.secrets ? ['secrets'] : [])];
      // A URL taken out of forward_urls takes its health with it.
      const health = state.forward_health?.filter((h) => spec.forward_urls.includes(h.url));
      const endpoint = { ...state, ...spec, ...secrets, ...verificationSecretOf(command), ...at, ...(health ? { forward_health: health } : {}) };
      return [{ ...base, org_id, type: 'EndpointUpdated', data: { endpoint, changed } }];
    }
    case 'DeleteEndpoint':
      return [{ ...base, org_id, type: 'EndpointDeleted', data: { endpoint: { ...state, ...at } } }];
    case 'PauseEndpoint':
      return [{ ...base, org_id, type: 'EndpointPaused', data: { endpoint: { ...state, ...at, paused: true } } }];
    case 'ResumeEndpoint':
      return [{ ...base, org_id, type: 'EndpointResumed', data: { endpoint: { ...state, ...at, paused: false } } }];
    case 'EnableForward':
      return enableForward(command.url, command.recoverSince, state, meta);
    default:
      return unreachable(command);
  }
}
