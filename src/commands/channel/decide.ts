import { notFound, unprocessable } from '../../lib/errors.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import { MAX_NAME_LENGTH, checkLength } from '../payload-checks.ts';
import { NOTIFICATION_EVENTS, type NotificationEventName } from '../notification/types.ts';
import { CHANNEL_KINDS, checkConfigComplete, checkConfigValues, isChannelKind, splitConfig, withDefaults, type ChannelKind, type ConfigInput } from './kinds.ts';
import { CHANNEL_ID_PATTERN, MAX_CHANNELS, MAX_RESOURCE_CHANNELS, type Channel, type ChannelCommand, type ChannelEvent, type ChannelSet, type SealedConfig } from './types.ts';

export function evolveChannels(_state: ChannelSet | null, event: ChannelEvent): ChannelSet | null {
  switch (event.type) {
    case 'ChannelCreated':
    case 'ChannelUpdated':
    case 'ChannelDeleted':
      return event.data.set;
    default:
      return unreachable(event);
  }
}

function checkKind(kind: unknown): asserts kind is ChannelKind {
  if (!isChannelKind(kind)) throw unprocessable(`kind must be one of ${CHANNEL_KINDS.join(', ')}`, 'kind');
}

function checkEvents(events: readonly NotificationEventName[] | null | undefined): void {
  if (events == null) return;
  const seen = new Set<string>();
  events.forEach((e, i) => {
    if (!NOTIFICATION_EVENTS.includes(e)) throw unprocessable(`events[${i}] must be one of ${NOTIFICATION_EVENTS.join(', ')}`, `events[${i}]`);
    if (seen.has(e)) throw unprocessable(`events[${i}] repeats ${e}`, `events[${i}]`);
    seen.add(e);
  });
}

/**
 * The stored config after a change. A create, or a change of kind, starts from nothing
 * (another kind's values mean nothing to this one); otherwise the values given replace
 * those stored and a null removes one (PUT changes what it names, as everywhere).
 */
export function mergeConfig(stored: Record<string, string>, given: Record<string, string | null>, fresh: boolean): Record<string, string> {
  const out: Record<string, string> = fresh ? {} : { ...stored };
  for (const [name, value] of Object.entries(given)) {
    if (value === null) delete out[name];
    else out[name] = value;
  }
  return out;
}

/** The channel a create or update makes: its config checked against its kind, complete, its secrets as sealed. */
function channelOf(base: Omit<Channel, 'kind' | 'name' | 'config' | 'secrets' | 'sealed_secrets' | 'events'> & { kind: unknown; name: string; events: NotificationEventName[] | null },
  storedConfig: Record<string, string>, given: ConfigInput, fresh: boolean, sealed: SealedConfig): Channel {
  const kind = base.kind;
  checkKind(kind);
  checkLength(base.name, 'name', MAX_NAME_LENGTH, 1);
  checkEvents(base.events);
  checkConfigValues(kind, given);
  const config = withDefaults(kind, mergeConfig(storedConfig, splitConfig(kind, given).plain, fresh));
  checkConfigComplete(kind, config, Object.keys(sealed.masks));
  return { ...base, kind, config, secrets: sealed.masks, sealed_secrets: sealed.sealed };
}

const emptySet = (orgId: string): ChannelSet => ({ org_id: orgId, channels: [], version: 0 });

/** The set with `channel` in place of (or after) the one of its id; null removes it. */
function nextSet(set: ChannelSet, id: string, channel: Channel | null): ChannelSet {
  const others = set.channels.filter((c) => c.id !== id);
  const at = set.channels.findIndex((c) => c.id === id);
  const channels = channel ? (at < 0 ? [...others, channel] : [...others.slice(0, at), channel, ...others.slice(at)]) : others;
  return { org_id: set.org_id, channels, version: set.version + 1 };
}

export function decideChannels(command: ChannelCommand, state: ChannelSet | null, meta: CommandMeta): ChannelEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  switch (command.type) {
    case 'CreateChannel': {
      const set = state ?? emptySet(command.orgId);
      const { input } = command;
      const channel = channelOf({
        id: meta.newId('chn'), org_id: command.orgId, kind: input.kind, name: input.name, events: input.events ?? null, created_at: meta.now, updated_at: meta.now,
      }, {}, input.config, true, command.secrets);
      if (set.channels.length >= MAX_CHANNELS) throw unprocessable(`an organization has at most ${MAX_CHANNELS} channels; delete one first`, null);
      return [{ ...base, type: 'ChannelCreated', org_id: command.orgId, data: { channel, set: nextSet(set, channel.id, channel) } }];
    }
    case 'UpdateChannel': {
      const current = state?.channels.find((c) => c.id === command.id);
      if (!state || !current) throw notFound('Channel not found');
      const { input } = command;
      const kind = input.kind ?? current.kind;
      const fresh = kind !== current.kind;
      const channel = channelOf({
        ...current, kind, name: input.name ?? current.name, events: input.events === undefined ? current.events : input.events, updated_at: meta.now,
      }, current.config, input.config ?? {}, fresh, command.secrets);
      const changed = Object.keys(input);
      return [{ ...base, type: 'ChannelUpdated', org_id: state.org_id, data: { channel, changed, set: nextSet(state, channel.id, channel) } }];
    }
    case 'DeleteChannel': {
      const current = state?.channels.find((c) => c.id === command.id);
      if (!state || !current) throw notFound('Channel not found');
      return [{ ...base, type: 'ChannelDeleted', org_id: state.org_id, data: { channel: { ...current, updated_at: meta.now }, set: nextSet(state, current.id, null) } }];
    }
    default:
      return unreachable(command);
  }
}

/**
 * A resource's `channels` (tasks, schedules, monitors, endpoints): null = every
 * channel of the organization, [] = none of them, else these ids, each once. An id
 * that names no channel (deleted since, or never one) hears nothing: it is not
 * refused, as a channel deleted later would leave the same list behind.
 */
export function checkResourceChannels(channels: readonly string[] | null | undefined): void {
  if (channels == null) return;
  if (channels.length > MAX_RESOURCE_CHANNELS) throw unprocessable(`channels must NOT have more than ${MAX_RESOURCE_CHANNELS} items`, 'channels');
  const pattern = new RegExp(CHANNEL_ID_PATTERN);
  const seen = new Set<string>();
  channels.forEach((id, i) => {
    if (typeof id !== 'string' || !pattern.test(id)) throw unprocessable(`channels[${i}] must be a channel id (chn_…)`, `channels[${i}]`);
    if (seen.has(id)) throw unprocessable(`channels[${i}] repeats ${id}`, `channels[${i}]`);
    seen.add(id);
  });
}
