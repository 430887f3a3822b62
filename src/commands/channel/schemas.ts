import { agree, Bool, Int, Nullable, OneOf, Str, StringMap, Time, Type, type Disagreeing } from '../schema-kit.ts';
import { NOTIFICATION_EVENT_NAMES } from '../notification/schemas.ts';
import { CHANNEL_KINDS } from './kinds.ts';

const kind = OneOf(CHANNEL_KINDS);

const sealed = Type.Object({
  v: Type.Literal(1, { description: 'The sealing format' }),
  kid: Str('Which key sealed it'),
  iv: Str(),
  tag: Str(),
  data: Str('The sealed values: never the clear text'),
}, { description: 'The secret values, sealed as endpoint secrets are' });

const channelSchema = Type.Object({
  id: Str('`chn_…`'),
  org_id: Str(),
  kind,
  name: Str(),
  config: StringMap('The config values stored in the clear (defaults filled in)'),
  secrets: StringMap('The secret values\' names and masks (`***abcd`)'),
  sealed_secrets: Nullable(sealed),
  events: Nullable(Type.Array(OneOf(NOTIFICATION_EVENT_NAMES), { description: 'The notification events it hears; null = every one' })),
  created_at: Time(),
  updated_at: Time(),
}, { description: 'One notification channel as the event left it' });

const channelSet = Type.Object({
  org_id: Str(),
  channels: Type.Array(channelSchema),
  version: Int('Counts the set\'s events: of two copies, the higher is the newer'),
}, { description: 'Every channel of the organization after the event (the aggregate is the set)' });

export const CHANNEL_EVENT_SCHEMAS = {
  ChannelCreated: Type.Object({ channel: channelSchema, set: channelSet }),
  ChannelUpdated: Type.Object({ channel: channelSchema, changed: Type.Array(Str()), set: channelSet }),
  ChannelDeleted: Type.Object({ channel: channelSchema, set: channelSet }),
  ChannelTested: Type.Object({
    notification_id: Str(),
    channel: Type.Object({ id: Str(), kind, name: Str() }),
    delivery: Type.Object({ at: Time(), ok: Bool(), status_code: Nullable(Int()), error: Nullable(Str()) }),
  }, { description: 'A test message sent from POST /channels/{id}/test, recorded like a notification\'s delivery' }),
};
agree<Disagreeing<typeof CHANNEL_EVENT_SCHEMAS>>();
