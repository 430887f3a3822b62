import { agree, Str, Time, Type, type Disagreeing } from '../schema-kit.ts';

export const DEBOUNCE_EVENT_SCHEMAS = {
  DebounceWindowOpened: Type.Object({
    window: Type.Object({ lane: Str(), debounce_key: Str(), task_id: Str(), opened_at: Time(), run_at: Time() }),
  }, { description: 'Requests with this lane and debounce_key until `run_at` update one task' }),
};
agree<Disagreeing<typeof DEBOUNCE_EVENT_SCHEMAS>>();
