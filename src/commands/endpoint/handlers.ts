import { SUBJECTS } from '../../../streams/definitions.ts';
import { forbidden, notFound } from '../../lib/errors.ts';
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

/** `liveCount` is the organization's current number of endpoints, for the Free plan's limit. */
export async function createEndpoint(
  deps: CommandDeps,
  orgId: string,
  input: EndpointInput & { name: string },
  secrets: SecretsChange | null,
  plan: { name: string; limit: number | null; liveCount: number },
): Promise<Result> {
  if (plan.limit !== null && plan.liveCount >= plan.limit) {
    throw forbidden(`the ${plan.name} plan allows ${plan.limit} endpoints; delete one or upgrade to Pro`);
  }
  const event = decideEndpoint({ type: 'CreateEndpoint', orgId, input, secrets }, null, commandMeta(deps.clock));
  const endpoint = evolveEndpoint(null, event)!;
  const seq = await deps.store.append(SUBJECTS.endpoint(orgId, endpoint.id), event, 0);
  return { event, state: endpoint, seq };
}
