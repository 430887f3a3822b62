import { CHANNEL_KINDS, CONFIG_FIELDS, type ConfigField } from '../../commands/channel/kinds.ts';
import { CHANNEL_ID_PATTERN, MAX_RESOURCE_CHANNELS } from '../../commands/channel/types.ts';
import { NOTIFICATION_EVENTS } from '../../commands/notification/types.ts';
import { nameSchema, nullable, urlSchema } from './common.ts';

// Written from the kinds' table (src/commands/channel/kinds.ts), whose rules the
// decider applies on every path (a PUT's config is checked against the stored kind,
// which no schema of the body alone can know).

/** A resource's `channels`: null = every channel of the organization, [] = none. */
export const channelsSchema = nullable({
  type: 'array',
  maxItems: MAX_RESOURCE_CHANNELS,
  uniqueItems: true,
  items: { type: 'string', pattern: CHANNEL_ID_PATTERN },
  description: 'The notification channels (chn_…) this resource notifies; null (the default) = every channel of the organization, [] = none of them',
});

function fieldSchema(f: ConfigField): object {
  const text = f.type === 'url' ? urlSchema : f.type === 'enum' ? { type: 'string', enum: f.values } : { type: 'string', minLength: 1, maxLength: 2048, ...(f.type === 'email' ? { format: 'email' } : {}) };
  const schema = f.integer ? { anyOf: [text, { type: 'integer' }] } : text;
  const described = { ...schema, description: `${f.description}${f.default ? ` (default ${f.default})` : ''}`, ...(f.secret ? { writeOnly: true } : {}) };
  return f.required ? described : nullable(described);
}

/** `config` of one kind: its fields, the required ones required (a PUT of the same kind may give some only). */
const configOf = (kind: (typeof CHANNEL_KINDS)[number], requireAll: boolean) => {
  const fields = CONFIG_FIELDS[kind];
  const required = fields.filter((f) => f.required).map((f) => f.name);
  return {
    type: 'object',
    additionalProperties: false,
    ...(requireAll && required.length ? { required } : {}),
    properties: Object.fromEntries(fields.map((f) => [f.name, fieldSchema(f)])),
  };
};

const kindConfigs = (requireAll: boolean) => CHANNEL_KINDS.map((kind) => ({
  if: { required: ['kind'], properties: { kind: { const: kind } } },
  then: { properties: { config: configOf(kind, requireAll) } },
}));

const channelProperties = {
  kind: { type: 'string', enum: CHANNEL_KINDS },
  name: nameSchema,
  config: {
    type: 'object',
    description: 'The kind\'s settings. Secrets (tokens, keys, webhook URLs) are write-only: responses show them as *** and their last 4 characters. ' +
      'On PUT the values given replace the stored ones and a null removes an optional one; a PUT that changes `kind` gives the new kind\'s whole config.',
  },
  events: nullable({
    type: 'array',
    uniqueItems: true,
    items: { type: 'string', enum: NOTIFICATION_EVENTS },
    description: 'The notification events this channel hears; null (the default) = every event',
  }),
} as const;

export const createChannelSchema = {
  $id: 'CreateChannel',
  type: 'object',
  required: ['kind', 'name', 'config'],
  additionalProperties: false,
  properties: channelProperties,
  allOf: kindConfigs(true),
} as const;

export const updateChannelSchema = {
  $id: 'UpdateChannel',
  type: 'object',
  additionalProperties: false,
  properties: channelProperties,
  // With `kind`, the config's fields are that kind's; whether they are complete with what is
  // stored (the same kind) or alone (a new kind) is the decider's check, as is a config without `kind`.
  allOf: kindConfigs(false),
} as const;

/** `POST /channels/{id}/test` takes no body (or `{}`). */
export const testChannelSchema = { $id: 'TestChannel', type: 'object', additionalProperties: false, properties: {} } as const;
