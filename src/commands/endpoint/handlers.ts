import { SUBJECTS } from '../../../streams/definitions.ts';
import { notFound } from '../../lib/errors.ts';
import { reserveSlot, type PlanLimit } from '../quota.ts';
import { ID_PATTERN } from '../../lib/ids.ts';
import { commandMeta, execute, type CommandDeps, type Decided } from '../execute.ts';
import { decideEndpoint, evolveEndpoint, type EndpointCommand } from './decide.ts';
import type { Endpoint, EndpointEvent, EndpointInput, SecretsChange } from './types.ts';

type Result = Decided<Endpoint, EndpointEvent>;

export function runEndpoint(deps: CommandDeps, orgId: string, id: string, command: EndpointCommand): Promise<Result> {
  if (!ID_PATTERN.test(id) || !id.startsWith('ep_')) throw notFound('Endpoint not found');
  return execute(deps, SUBJECTS.endpoint(orgId, id), command, decideEndpoint, (s, e) => {
    const next = evolveEndpoint(s, e);
    return next && next.org_id === orgId ? next : null;
  });
}

/** `plan.live` lists the organization's endpoints in the read model, for the Free plan's limit. */
export async function createEndpoint(
  deps: CommandDeps,
  orgId: string,
  input: EndpointInput & { name: string },
  secrets: SecretsChange | null,
  plan: PlanLimit,
): Promise<Result> {
  const event = decideEndpoint({ type: 'CreateEndpoint', orgId, input, secrets }, null, commandMeta(deps.clock));
  const endpoint = evolveEndpoint(null, event)!;
  await reserveSlot(deps, orgId, 'endpoint', plan, endpoint.id, async (id) => {
    const last = await deps.store.last<EndpointEvent>(SUBJECTS.endpoint(orgId, id));
    return last ? evolveEndpoint(null, last.event) !== null : null;
  });
  const seq = await deps.store.append(SUBJECTS.endpoint(orgId, endpoint.id), event, 0);
  return { event, state: endpoint, seq };
}
