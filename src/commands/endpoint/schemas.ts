import { agree, ChannelIds, Bool, Int, Nullable, OneOf, Opt, Str, StringMap, Time, Type, type Disagreeing } from '../schema-kit.ts';
import { VERIFICATION_TYPES } from './types.ts';
import { failureStreak, finalRun } from '../schedule/schemas.ts';

const forwardState = Type.Object({
  url: Str(),
  status: OneOf(['active', 'disabled'] as const),
  ...failureStreak.properties,
  disabled_at: Nullable(Time()),
}, { description: 'A forward URL\'s destination health' });

const sealed = Type.Object({
  v: Type.Literal(1), kid: Str('Names the key without revealing it'), iv: Str(), tag: Str(), data: Str('base64 of the ciphertext'),
}, { description: 'Secrets sealed with the service key (AES-256-GCM)' });

const endpointSchema = Type.Object({
  id: Str('`ep_…`'),
  org_id: Str(),
  slug: Str('The inbound URL\'s credential'),
  name: Str(),
  forward_urls: Type.Array(Str()),
  retry_attempts: Int(),
  use_lane: Bool(),
  enabled: Bool(),
  forward_method: Nullable(Str()),
  forward_headers: Nullable(StringMap()),
  forward_body: Nullable(Str()),
  on_failure_url: Nullable(Str()),
  on_recovery_url: Nullable(Str()),
  notify_on_failure: Nullable(Bool()),
  notify_on_recovery: Nullable(Bool()),
  script: Nullable(Str()),
  verification: Opt(Nullable(Type.Object({
    type: OneOf(VERIFICATION_TYPES),
    header: Opt(Str()),
    algorithm: Opt(OneOf(['sha256', 'sha1'] as const)),
    encoding: Opt(OneOf(['hex', 'base64'] as const)),
    prefix: Opt(Str()),
  }, { description: 'Absent in events written before verification presets: none' }))),
  flow_control: Opt(Nullable(Type.Object({ parallelism: Nullable(Int()), rate: Nullable(Int()), period: Str() }, { description: 'Absent in events written before flow control: none' }))),
  paused: Bool(),
  secret_names: Type.Array(Str()),
  sealed_secrets: Nullable(sealed),
  sealed_verification_secret: Opt(Nullable(sealed)),
  created_at: Time(),
  updated_at: Time(),
  channels: ChannelIds(),
  forward_health: Opt(Type.Array(forwardState, { description: 'Forward URLs that had a final result counted; absent: none' })),
}, { description: 'The endpoint as the event left it' });

export const ENDPOINT_EVENT_SCHEMAS = {
  EndpointCreated: Type.Object({ endpoint: endpointSchema }),
  EndpointUpdated: Type.Object({ endpoint: endpointSchema, changed: Type.Array(Str()) }),
  EndpointDeleted: Type.Object({ endpoint: endpointSchema }),
  EndpointPaused: Type.Object({ endpoint: endpointSchema }),
  EndpointResumed: Type.Object({ endpoint: endpointSchema }),
  EndpointForwardFailureCounted: Type.Object({ endpoint: endpointSchema, url: Str(), execution_id: Str() }, { description: 'Destination health: a delivery to `url` ended failed or timed out after its last attempt' }),
  EndpointForwardFailuresReset: Type.Object({ endpoint: endpointSchema, url: Str(), execution_id: Str() }, { description: 'Destination health: a delivery to `url` succeeded after failures' }),
  EndpointForwardDisabled: Type.Object({ endpoint: endpointSchema, url: Str(), execution_id: Str('The failure that disabled it'), execution: Opt(finalRun) }, { description: 'Destination health: `url` disabled; nothing is sent to it until it is enabled' }),
  EndpointForwardEnabled: Type.Object({ endpoint: endpointSchema, url: Str(), recover_since: Nullable(Time('Where the replay job asked for starts; null: none')) }, { description: '`POST /endpoints/{id}/forwards/enable`: `url` active again' }),
};
agree<Disagreeing<typeof ENDPOINT_EVENT_SCHEMAS>>();
