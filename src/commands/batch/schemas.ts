import { agree, Int, Nullable, Opt, Str, Time, Type, type Disagreeing } from '../schema-kit.ts';
import { TASK_EVENT_SCHEMAS } from '../task/schemas.ts';

const taskCreated = Type.Object({
  type: Type.Literal('TaskCreated'), id: Str(), at: Time(), org_id: Str(), v: Opt(Type.Number()), traceparent: Opt(Str()), data: TASK_EVENT_SCHEMAS.TaskCreated,
});

export const BATCH_EVENT_SCHEMAS = {
  BatchAccepted: Type.Object({
    batch_id: Str(),
    lane: Nullable(Str()),
    flow_key: Opt(Str()),
    scheduled_for: Time(),
    created: Opt(Int('How many `TaskCreated` precede it in its commit (absent in the older shape that carries `tasks`)')),
    tasks: Opt(Type.Array(taskCreated, { description: 'Before 2026-11-26 only: the batch\'s tasks, each also appended to its task\'s own subject' })),
  }, { description: 'A whole batch accepted at once: the last event of one commit on the batch\'s subject, after the `TaskCreated` of each of its tasks' }),
};
agree<Disagreeing<typeof BATCH_EVENT_SCHEMAS>>();
