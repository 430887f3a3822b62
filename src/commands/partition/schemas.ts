import { agree, Int, Nullable, Opt, Str, Type, type Disagreeing } from '../schema-kit.ts';
import { attemptJobSchema } from '../execution/schemas.ts';

export const PARTITION_EVENT_SCHEMAS = {
  PartitionClaimed: Type.Object({
    partition: Int(),
    owner: Str('The claiming process\'s instance id'),
    after_seq: Int('The subject\'s last sequence when the claim was decided (0: none yet)'),
    resume_from: Opt(Int('Where the claiming owner reads EVENTS from')),
  }, { description: 'A partition owner took over its partition (organization `_system`); every later commit of the old owner is refused' }),
  ExecutionHandedToKey: Type.Object({
    execution_id: Str(),
    key: Str('The flow-control key its task names'),
    limits: Type.Object({ parallelism: Nullable(Int()), rate: Nullable(Int()), period: Str() }, { description: 'The key\'s limits as the task names them' }),
    job: attemptJobSchema,
    uncounted_attempts: Int(),
    handoff: Int('Counts the hand-offs of this execution'),
  }, { description: 'A batch lane\'s head handed by its lane\'s owner to the owner of its flow-control key (another partition), which sends that attempt once it has room and records the result on the execution\'s subject' }),
};
agree<Disagreeing<typeof PARTITION_EVENT_SCHEMAS>>();
