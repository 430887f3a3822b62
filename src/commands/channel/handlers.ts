import { SUBJECTS } from '../../../streams/subjects.ts';
import type { EventStore } from '../store.ts';
import type { Sealer } from '../../lib/sealed-secrets.ts';
import { execute, type CommandDeps, type Decided } from '../execute.ts';
import { isChannelKind, maskSecret, splitConfig, type ChannelKind, type ConfigInput } from './kinds.ts';
import { decideChannels, evolveChannels, mergeConfig } from './decide.ts';
import type { Channel, ChannelEvent, ChannelInput, ChannelSet, SealedConfig } from './types.ts';

type Result = Decided<ChannelSet, ChannelEvent>;

/**
 * The secrets of a channel after a change, sealed: those stored (unless the kind
 * changes) with the ones given over them, a null removing one.
 */
function sealConfig(box: Sealer, kind: unknown, stored: Record<string, string>, given: ConfigInput | undefined, fresh: boolean): SealedConfig {
  const secrets = isChannelKind(kind) && given ? splitConfig(kind, given).secrets : {};
  const merged = mergeConfig(stored, secrets, fresh);
  const masks = Object.fromEntries(Object.entries(merged).map(([name, value]) => [name, maskSecret(value)]));
  return { sealed: box.seal(merged), masks };
}

export async function loadChannels(store: EventStore, orgId: string): Promise<ChannelSet | null> {
  const last = await store.last<ChannelEvent>(SUBJECTS.channels(orgId));
  return last ? evolveChannels(null, last.event) : null;
}

export function createChannel(deps: CommandDeps, box: Sealer, orgId: string, input: ChannelInput & { kind: ChannelKind; name: string; config: ConfigInput }): Promise<Result> {
  const secrets = sealConfig(box, input.kind, {}, input.config, true);
  return execute(deps, SUBJECTS.channels(orgId), { type: 'CreateChannel', orgId, input, secrets }, decideChannels, evolveChannels);
}

/** The secrets are sealed after each load (`gather`): a retry after a conflict merges with what is stored then. */
export function updateChannel(deps: CommandDeps, box: Sealer, orgId: string, id: string, input: ChannelInput): Promise<Result> {
  return execute(deps, SUBJECTS.channels(orgId), { type: 'UpdateChannel', id, input, secrets: { sealed: null, masks: {} } }, decideChannels, evolveChannels, {
    gather: async (command, state) => {
      if (command.type !== 'UpdateChannel') return command;
      const current = state?.channels.find((c) => c.id === id);
      if (!current) return command;
      const fresh = (input.kind ?? current.kind) !== current.kind;
      const stored = fresh || !current.sealed_secrets ? {} : box.open(current.sealed_secrets);
      return { ...command, secrets: sealConfig(box, input.kind ?? current.kind, stored, input.config, fresh) };
    },
  });
}

export function deleteChannel(deps: CommandDeps, orgId: string, id: string): Promise<Result> {
  return execute(deps, SUBJECTS.channels(orgId), { type: 'DeleteChannel', id }, decideChannels, evolveChannels);
}

/** The channel of that id in the organization's set, or undefined. */
export const channelIn = (set: ChannelSet | null, id: string): Channel | undefined => set?.channels.find((c) => c.id === id);
