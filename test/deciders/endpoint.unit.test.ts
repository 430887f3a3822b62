import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideEndpoint, evolveEndpoint, type EndpointCommand } from '../../src/commands/endpoint/decide.ts';
import { ENDPOINT_DEFAULTS, type EndpointInput, type SecretsChange } from '../../src/commands/endpoint/types.ts';
import type { Plan } from '../../src/commands/organization/types.ts';
import type { SealedSecrets } from '../../src/lib/sealed-secrets.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

const spec = deciderSpec(decideEndpoint, evolveEndpoint);
const ORG = 'org_ep';
const A = 'https://a.example.com/in';
const B = 'https://b.example.com/in';
const secrets = (...names: string[]): SecretsChange => ({ names, sealed: names.length ? ({ sealed: 'x' } as unknown as SealedSecrets) : null });

const create = (input: EndpointInput = {}, plan: Plan = 'free', s: SecretsChange | null = null): EndpointCommand =>
  ({ type: 'CreateEndpoint', orgId: ORG, plan, input: { name: 'hooks', ...input }, secrets: s });
const update = (input: EndpointInput, plan: Plan = 'free', s: SecretsChange | null = null): EndpointCommand => ({ type: 'UpdateEndpoint', plan, input, secrets: s });
const created = decideEndpoint(create({ forward_urls: [A] }), null, meta());
const endpoint = spec.stateAfter(created)!;

describe('endpoint decider: create', () => {
  test('defaults, an id, a slug distinct from it, not paused', () => {
    const [event] = spec.given([]).when(create()).thenMatches([{
      type: 'EndpointCreated',
      org_id: ORG,
      data: { endpoint: { ...ENDPOINT_DEFAULTS, name: 'hooks', id: 'ep_1', org_id: ORG, paused: false, secret_names: [], sealed_secrets: null, sealed_verification_secret: null, created_at: NOW, updated_at: NOW } },
    }]);
    assert.match(event!.data.endpoint.slug, /^ep_[0-9a-z]{32}$/);
  });

  test("empty custom forwarding means the original: '' and {} are stored as null", () => {
    spec.given([]).when(create({ forward_method: '', forward_body: '', forward_headers: {} }))
      .thenMatches([{ data: { endpoint: { forward_method: null, forward_body: null, forward_headers: null } } }]);
  });

  test('422: a forward URL twice, a forward body over 256 KB, a header jetcron sets', () => {
    spec.given([]).when(create({ forward_urls: [A, B, A] })).thenRefuses({ status: 422, field: 'forward_urls[2]' });
    spec.given([]).when(create({ forward_body: 'x'.repeat(262_145) })).thenRefuses({ status: 422, field: 'forward_body' });
    spec.given([]).when(create({ forward_headers: { 'X-Jetcron-Signature': 'forged' } })).thenRefuses({ status: 422, field: 'forward_headers.X-Jetcron-Signature' });
  });

  test('plan: script and secrets need Pro (403 naming the field, before the other checks); no secrets is fine on Free', () => {
    spec.given([]).when(create({ script: 'function filter(req) return true end', forward_body: 'x'.repeat(262_145) }))
      .thenRefuses({ status: 403, field: 'script', message: 'Lua scripts need the Pro plan' });
    spec.given([]).when(create({}, 'free', secrets('TOKEN'))).thenRefuses({ status: 403, field: 'secrets', message: 'secrets need the Pro plan' });
    spec.given([]).when(create({}, 'free', secrets())).thenMatches([{ data: { endpoint: { secret_names: [] } } }]);
    spec.given([]).when(create({ script: 'x = 1' }, 'pro', secrets('TOKEN'))).thenMatches([{ data: { endpoint: { script: 'x = 1', secret_names: ['TOKEN'] } } }]);
  });
});

describe('endpoint decider: changes', () => {
  test('update: the fields sent, `secrets` in changed when they were replaced', () => {
    spec.given(created).when(update({ retry_attempts: 0, forward_urls: [B] }, 'pro', secrets('K')), meta(later(1000))).thenMatches([{
      type: 'EndpointUpdated',
      data: { endpoint: { ...endpoint, retry_attempts: 0, forward_urls: [B], secret_names: ['K'], sealed_secrets: { sealed: 'x' }, updated_at: later(1000) }, changed: ['retry_attempts', 'forward_urls', 'secrets'] },
    }]);
  });

  test('update: the plan and input checks come before "not found"', () => {
    spec.given([]).when(update({ script: 'x' })).thenRefuses({ status: 403, field: 'script' });
    spec.given([]).when(update({ forward_headers: { Connection: 'close' } }, 'pro')).thenRefuses({ status: 422, field: 'forward_headers.Connection' });
    spec.given([]).when(update({ name: 'x' }, 'pro')).thenRefuses({ status: 404, message: 'Endpoint not found' });
    spec.given(created).when(update({ forward_urls: [B, B] })).thenRefuses({ status: 422, field: 'forward_urls[1]' });
  });

  test('pause, resume, delete', () => {
    const paused = decideEndpoint({ type: 'PauseEndpoint' }, endpoint, meta());
    spec.given(created).when({ type: 'PauseEndpoint' }).thenMatches([{ type: 'EndpointPaused', data: { endpoint: { paused: true } } }]);
    spec.given([...created, ...paused]).when({ type: 'ResumeEndpoint' }).thenMatches([{ type: 'EndpointResumed', data: { endpoint: { paused: false } } }]);
    const deleted = decideEndpoint({ type: 'DeleteEndpoint' }, endpoint, meta());
    spec.given(created).when({ type: 'DeleteEndpoint' }).thenMatches([{ type: 'EndpointDeleted', data: { endpoint: { id: 'ep_1' } } }]);
    spec.given([...created, ...deleted]).when({ type: 'PauseEndpoint' }).thenRefuses({ status: 404 });
  });
});

describe('endpoint decider: verification presets', () => {
  const sealed = { sealed: 'v' } as unknown as SealedSecrets;
  const withPreset = (verification: EndpointInput['verification'], plan: Plan = 'free', secret: SealedSecrets | null = sealed): EndpointCommand =>
    ({ ...create({ verification }, plan), verificationSecret: secret } as EndpointCommand);

  test('every plan: the preset without its secret, the secret sealed beside it', () => {
    for (const type of ['standard-webhooks', 'stripe', 'github', 'shopify'] as const) {
      spec.given([]).when(withPreset({ type })).thenMatches([{ data: { endpoint: { verification: { type }, sealed_verification_secret: sealed } } }]);
    }
    const hmac = { type: 'hmac', header: 'X-Signature', algorithm: 'sha1', encoding: 'base64', prefix: 'sha1=' } as const;
    spec.given([]).when(withPreset(hmac)).thenMatches([{ data: { endpoint: { verification: hmac, sealed_verification_secret: sealed } } }]);
  });

  test('422 verification.<name>: no secret, an unknown type, hmac without its fields, hmac fields on another type', () => {
    spec.given([]).when(withPreset({ type: 'stripe' }, 'free', null)).thenRefuses({ status: 422, field: 'verification.secret' });
    spec.given([]).when(withPreset({ type: 'paypal' as 'stripe' })).thenRefuses({ status: 422, field: 'verification.type' });
    spec.given([]).when(withPreset({ type: 'hmac', algorithm: 'sha256', encoding: 'hex' })).thenRefuses({ status: 422, field: 'verification.header' });
    spec.given([]).when(withPreset({ type: 'hmac', header: 'X-Sig', encoding: 'hex' })).thenRefuses({ status: 422, field: 'verification.algorithm' });
    spec.given([]).when(withPreset({ type: 'hmac', header: 'X-Sig', algorithm: 'sha256' })).thenRefuses({ status: 422, field: 'verification.encoding' });
    spec.given([]).when(withPreset({ type: 'github', prefix: 'sha256=' })).thenRefuses({ status: 422, field: 'verification.prefix' });
    spec.given([]).when(withPreset({ type: 'shopify', header: 'X-Other' })).thenRefuses({ status: 422, field: 'verification.header' });
  });

  test('update: a new preset replaces the secret, null clears both, leaving it out keeps both', () => {
    const state = decideEndpoint(withPreset({ type: 'stripe' }), null, meta());
    const other = { sealed: 'w' } as unknown as SealedSecrets;
    spec.given(state).when({ ...update({ verification: { type: 'github' } }), verificationSecret: other } as EndpointCommand)
      .thenMatches([{ data: { endpoint: { verification: { type: 'github' }, sealed_verification_secret: other }, changed: ['verification'] } }]);
    spec.given(state).when(update({ verification: { type: 'github' } })).thenRefuses({ status: 422, field: 'verification.secret' });
    spec.given(state).when(update({ verification: null })).thenMatches([{ data: { endpoint: { verification: null, sealed_verification_secret: null } } }]);
    spec.given(state).when(update({ name: 'renamed' })).thenMatches([{ data: { endpoint: { verification: { type: 'stripe' }, sealed_verification_secret: sealed } } }]);
  });
});
