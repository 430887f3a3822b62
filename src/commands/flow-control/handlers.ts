import { createHash } from 'node:crypto';
import { SUBJECTS } from '../../../streams/subjects.ts';
import { execute, type CommandDeps, type Decided } from '../execute.ts';
import { checkLength } from '../payload-checks.ts';
import { decideFlowKey, evolveFlowKey } from './decide.ts';
import { MAX_FLOW_KEY_LENGTH } from './rules.ts';
import type { FlowKey, FlowKeyCommand, FlowKeyEvent } from './types.ts';

/** A key's subject: its SHA-256, so any text is one token. */
export const flowKeySubject = (orgId: string, key: string): string => SUBJECTS.flowKey(orgId, createHash('sha256').update(key).digest('hex'));

/** Pauses or resumes one key of the organization (`key` as the path gives it). */
export function runFlowKey(deps: CommandDeps, orgId: string, key: string, command: FlowKeyCommand): Promise<Decided<FlowKey, FlowKeyEvent>> {
  checkLength(key, 'key', MAX_FLOW_KEY_LENGTH, 1);
  return execute(deps, flowKeySubject(orgId, key), { ...command, orgId, key }, decideFlowKey, evolveFlowKey);
}
