import { unprocessable } from '../../lib/errors.ts';
import { checkUrl } from '../payload-checks.ts';

/**
 * The kinds of notification channel (the contract's "Notification channels") and the
 * `config` each takes, as data: the decider checks a config against it, the API's JSON
 * Schemas and the console's forms are written from it.
 */
export const CHANNEL_KINDS = [
  'email', 'webhook', 'slack', 'mattermost', 'google_chat', 'discord', 'teams', 'telegram', 'ntfy', 'pagerduty', 'opsgenie', 'pushover', 'gotify',
] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

export interface ConfigField {
  name: string;
  /** `url`: http(s), checked as outbound URLs are; `email`: one address; `text`: a line; `enum`: one of `values`. */
  type: 'url' | 'email' | 'text' | 'enum';
  required: boolean;
  /** Write-only: stored sealed, shown masked. */
  secret: boolean;
  values?: readonly string[];
  /** Used when the config leaves the field out. */
  default?: string;
  /** `text`: a pattern the value must match, and what the message says it is. */
  pattern?: { re: RegExp; says: string };
  /** Telegram's chat_id may be a number (a chat) or text (`@channelname`): a JSON integer is taken as its digits. */
  integer?: boolean;
  description: string;
}

const MAX_VALUE_LENGTH = 2048;

const webhookUrl = (what: string): ConfigField => ({ name: 'webhook_url', type: 'url', required: true, secret: true, description: `The ${what} incoming-webhook URL (write-only: it is the credential)` });
const apiUrl = (vendor: string): ConfigField => ({
  name: 'api_url', type: 'url', required: false, secret: false,
  description: `Replaces the scheme, host and port of ${vendor}'s documented URL and is put before its path (a proxy, a region, a test double)`,
});
const token = (name: string, description: string): ConfigField => ({
  name, type: 'text', required: true, secret: true, pattern: { re: /^[\x21-\x7e]{1,512}$/, says: 'must be 1 to 512 printable characters without spaces' }, description,
});

export const CONFIG_FIELDS: Record<ChannelKind, readonly ConfigField[]> = {
  email: [{ name: 'to', type: 'email', required: true, secret: false, description: 'The address the message goes to (SMTP_URL must be set)' }],
  webhook: [{ name: 'url', type: 'url', required: true, secret: false, description: "Receives the organization webhook's JSON, signed like every jetcron request" }],
  slack: [webhookUrl('Slack')],
  mattermost: [webhookUrl('Mattermost')],
  google_chat: [webhookUrl('Google Chat space')],
  discord: [webhookUrl('Discord channel')],
  teams: [webhookUrl('Teams Workflows ("Post to a channel when a webhook request is received")')],
  telegram: [
    token('bot_token', 'The bot token from @BotFather (write-only)'),
    { name: 'chat_id', type: 'text', required: true, secret: false, integer: true, pattern: { re: /^(-?\d{1,20}|@[A-Za-z0-9_]{5,64})$/, says: 'must be a chat id (digits, maybe with a leading -) or @channelname' }, description: 'The chat, group or @channel the bot posts to' },
    apiUrl('Telegram'),
  ],
  ntfy: [
    { name: 'server_url', type: 'url', required: false, secret: false, default: 'https://ntfy.sh', description: 'The ntfy server (default https://ntfy.sh); the message goes to {server_url}/{topic}' },
    { name: 'topic', type: 'text', required: true, secret: false, pattern: { re: /^[-_A-Za-z0-9]{1,64}$/, says: 'must be 1 to 64 letters, digits, - or _' }, description: 'The topic' },
    { ...token('token', 'An access token, sent as a bearer token (write-only)'), required: false },
  ],
  pagerduty: [token('routing_key', 'The integration (routing) key of an Events API v2 integration (write-only)'), apiUrl('PagerDuty')],
  opsgenie: [
    token('api_key', 'The key of an API integration, sent as GenieKey (write-only)'),
    { name: 'region', type: 'enum', required: false, secret: false, values: ['us', 'eu'], default: 'us', description: 'us: api.opsgenie.com, eu: api.eu.opsgenie.com' },
    apiUrl('Opsgenie'),
  ],
  pushover: [token('app_token', 'The application API token (write-only)'), token('user_key', 'The user or group key (write-only)'), apiUrl('Pushover')],
  gotify: [
    { name: 'server_url', type: 'url', required: true, secret: false, description: 'The Gotify server; the message goes to {server_url}/message' },
    token('app_token', 'An application token, sent as X-Gotify-Key (write-only)'),
  ],
};

export const isChannelKind = (kind: unknown): kind is ChannelKind => (CHANNEL_KINDS as readonly unknown[]).includes(kind);

export const secretNamesOf = (kind: ChannelKind): string[] => CONFIG_FIELDS[kind].filter((f) => f.secret).map((f) => f.name);

/** A config's values as given: null removes an optional value (PUT), anything else is checked. */
export type ConfigInput = Record<string, unknown>;

/** The config split into what is stored in the clear and what is sealed; nulls kept (they remove). */
export function splitConfig(kind: ChannelKind, config: ConfigInput): { plain: Record<string, string | null>; secrets: Record<string, string | null> } {
  const plain: Record<string, string | null> = {};
  const secrets: Record<string, string | null> = {};
  for (const field of CONFIG_FIELDS[kind]) {
    if (!(field.name in config)) continue;
    const v = config[field.name];
    const value = v === null ? null : typeof v === 'number' ? String(v) : (v as string);
    (field.secret ? secrets : plain)[field.name] = value;
  }
  return { plain, secrets };
}

const EMAIL = /^[^\s@<>(),;:"]+@[^\s@<>(),;:"]+\.[^\s@<>(),;:"]+$/;

/** Each value given: a known field of the kind, of its type. `config.<name>` names the one at fault. */
export function checkConfigValues(kind: ChannelKind, config: ConfigInput): void {
  const fields = new Map(CONFIG_FIELDS[kind].map((f) => [f.name, f]));
  for (const [name, value] of Object.entries(config)) {
    const at = `config.${name}`;
    const field = fields.get(name);
    if (!field) throw unprocessable(`unknown field "${at}" for kind ${kind} (it takes ${[...fields.keys()].join(', ')})`, at);
    if (value === null) {
      if (field.required) throw unprocessable(`${at} is required and cannot be removed`, at);
      continue;
    }
    const text = field.integer && Number.isInteger(value) ? String(value) : value;
    if (typeof text !== 'string') throw unprocessable(`${at} has the wrong type`, at);
    if (text.length === 0) throw unprocessable(`${at} must not be empty`, at);
    if (text.length > MAX_VALUE_LENGTH) throw unprocessable(`${at} must NOT have more than ${MAX_VALUE_LENGTH} characters`, at);
    switch (field.type) {
      case 'url':
        checkUrl(text, at);
        break;
      case 'email':
        if (!EMAIL.test(text)) throw unprocessable(`${at} must be an email address`, at);
        break;
      case 'enum':
        if (!field.values!.includes(text)) throw unprocessable(`${at} must be one of ${field.values!.join(', ')}`, at);
        break;
      case 'text':
        if (field.pattern && !field.pattern.re.test(text)) throw unprocessable(`${at} ${field.pattern.says}`, at);
        break;
    }
  }
}

/** Every required field is there, in the clear or sealed (`secretNames`). */
export function checkConfigComplete(kind: ChannelKind, plain: Record<string, string>, secretNames: readonly string[]): void {
  for (const field of CONFIG_FIELDS[kind]) {
    if (!field.required) continue;
    const there = field.secret ? secretNames.includes(field.name) : plain[field.name] !== undefined;
    if (!there) throw unprocessable(`config.${field.name} is required for kind ${kind}`, `config.${field.name}`);
  }
}

/** The stored plain config with the kind's defaults filled in. */
export function withDefaults(kind: ChannelKind, plain: Record<string, string>): Record<string, string> {
  const out = { ...plain };
  for (const field of CONFIG_FIELDS[kind]) if (field.default !== undefined && out[field.name] === undefined) out[field.name] = field.default;
  return out;
}

/**
 * A secret as responses show it: `***` and its last 4 characters (the contract), or
 * `***` alone for a value of 8 characters or fewer, whose last 4 would give away half.
 */
export function maskSecret(value: string): string {
  return value.length > 8 ? `***${value.slice(-4)}` : '***';
}
