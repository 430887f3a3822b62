import { ApiError, notFound } from '../../lib/errors.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import type { ApiKey, ApiKeyCommand, ApiKeyEvent } from './types.ts';

export const evolveApiKey = (_state: ApiKey | null, event: ApiKeyEvent): ApiKey => event.data.key;

export function decideApiKey(command: ApiKeyCommand, state: ApiKey | null, meta: CommandMeta): ApiKeyEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  switch (command.type) {
    case 'CreateApiKey': {
      if (state) throw new ApiError(409, `api key ${command.publicId} already exists`);
      const key: ApiKey = { public_id: command.publicId, org_id: command.orgId, secret_hash: command.secretHash, created_at: meta.now, revoked_at: null };
      return [{ ...base, type: 'ApiKeyCreated', org_id: key.org_id, data: { key } }];
    }
    case 'RevokeApiKey': {
      if (!state) throw notFound(`api key ${command.publicId} not found`);
      if (state.revoked_at) throw new ApiError(409, `api key ${command.publicId} is already revoked`);
      const key = { ...state, revoked_at: meta.now };
      return [{ ...base, type: 'ApiKeyRevoked', org_id: key.org_id, data: { key } }];
    }
    default:
      return unreachable(command);
  }
}
