import { agree, Str, Type, type Disagreeing } from '../schema-kit.ts';

const key = Type.Object({ key: Str('The flow-control key as tasks name it') });

export const FLOW_KEY_EVENT_SCHEMAS = {
  FlowControlPaused: key,
  FlowControlResumed: key,
};
agree<Disagreeing<typeof FLOW_KEY_EVENT_SCHEMAS>>();
