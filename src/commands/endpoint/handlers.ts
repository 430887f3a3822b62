import { SUBJECTS } from '../../../streams/subjects.ts';
import type { CommandDeps, Decided } from '../execute.ts';
import { orgAggregate } from '../org-aggregate.ts';
import { featuresOf, type PlanLimit } from '../plan-rules.ts';
import { decideEndpoint, evolveEndpoint, type EndpointCommand } from './decide.ts';
import type { SealedSecrets } from '../../lib/sealed-secrets.ts';
import type { Endpoint, EndpointEvent, EndpointInput, SecretsChange } from './types.ts';
import type { FinalResult } from '../destination-health.ts';
import { execute } from '../execute.ts';
import { ConcurrencyError } from '../store.ts';

type Result = Decided<Endpoint, EndpointEvent>;

const endpoints = orgAggregate({ kind: 'endpoint', idPrefix: 'ep_', notFound: 'Endpoint not found', subject: SUBJECTS.endpoint, decide: decideEndpoint, evolve: evolveEndpoint });

export function runEndpoint(deps: CommandDeps, orgId: string, id: string, command: EndpointCommand): Promise<Result> {
  return endpoints.run(deps, orgId, id, command);
}

/** `plan.live` lists the organization's endpoints in the read model, for the Free plan's limit. */
export function createEndpoint(
  deps: CommandDeps,
  orgId: string,
  input: EndpointInput & { name: string },
  secrets: SecretsChange | null,
  plan: PlanLimit,
  onceId?: string,
  verificationSecret: SealedSecrets | null = null,
): Promise<Result> {
  return endpoints.create(deps, orgId, { type: 'CreateEndpoint', orgId, plan: featuresOf(plan), input, secrets, verificationSecret }, plan, onceId);
}

/**
 * Destination health: a delivery to `url` ended for good. Guarded like any endpoint
 * change; the decider passes over a result counted before (and an endpoint deleted
 * since), so the counting reader may hand the same result again after a crash.
 */
export function countForwardResult(deps: CommandDeps, orgId: string, endpointId: string, url: string, result: FinalResult): Promise<Result> {
  const subject = SUBJECTS.endpoint(orgId, endpointId);
  return execute(deps, subject, { type: 'CountForwardResult', url, result }, decideEndpoint, evolveEndpoint, { contended: () => new ConcurrencyError(subject) });
}
