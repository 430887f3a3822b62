import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import type { FlowKey, FlowKeyCommand, FlowKeyEvent } from './types.ts';

export function evolveFlowKey(_state: FlowKey | null, event: FlowKeyEvent): FlowKey {
  return { org_id: event.org_id, key: event.data.key, paused: event.type === 'FlowControlPaused' };
}

/**
 * Pause and resume of one key. A key may be paused before any task names it (what
 * arrives then waits); pausing a paused key, or resuming a running one, records nothing.
 */
export function decideFlowKey(command: FlowKeyCommand & { orgId: string; key: string }, state: FlowKey | null, meta: CommandMeta): FlowKeyEvent[] {
  const paused = state?.paused ?? false;
  const base = { id: meta.eventId, at: meta.now, org_id: command.orgId, data: { key: command.key } };
  switch (command.type) {
    case 'PauseFlowKey':
      return paused ? [] : [{ ...base, type: 'FlowControlPaused' }];
    case 'ResumeFlowKey':
      return paused ? [{ ...base, type: 'FlowControlResumed' }] : [];
    default:
      return unreachable(command);
  }
}
