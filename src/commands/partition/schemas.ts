import { agree, Int, Opt, Str, Type, type Disagreeing } from '../../events/schema-kit.ts';

export const PARTITION_EVENT_SCHEMAS = {
  PartitionClaimed: Type.Object({
    partition: Int(),
    owner: Str('The claiming process\'s instance id'),
    after_seq: Int('The subject\'s last sequence when the claim was decided (0: none yet)'),
    resume_from: Opt(Int('Where the claiming owner reads EVENTS from')),
  }, { description: 'A partition owner took over its partition (organization `_system`); every later commit of the old owner is refused' }),
};
agree<Disagreeing<typeof PARTITION_EVENT_SCHEMAS>>();
