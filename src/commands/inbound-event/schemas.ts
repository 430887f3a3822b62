import { agree, Bool, Int, Nullable, OneOf, Opt, Str, StringMap, Time, Type, type Disagreeing } from '../schema-kit.ts';

const record = Type.Object({
  id: Str('`evt_…`'),
  endpoint_id: Str(),
  method: Str(),
  path: Str(),
  query: Str(),
  source_ip: Nullable(Str()),
  received_at: Time(),
  body_size: Int(),
  inbound_seq: Int('The request\'s sequence in INBOUND (its body and headers are there only)'),
  outcome: OneOf(['forwarding', 'collected', 'filtered', 'rejected', 'debounced'] as const),
  script_logs: Opt(Type.Array(Str())),
  error_message: Opt(Nullable(Str())),
  debounce_key: Opt(Str()),
});

const snapshot = Type.Object({ id: Str(), name: Str(), use_lane: Bool(), retry_attempts: Int() }, { description: 'The endpoint as the event was routed' });

const plan = Type.Object({
  execution_id: Str(),
  url: Str(),
  method: Nullable(Str('null: the request\'s own')),
  headers: Nullable(StringMap('Merged over the request\'s headers')),
  body: Nullable(Str()),
  scheduled_for: Time(),
  script_error: Opt(Str('A script hook failed: the execution fails with this, unforwarded')),
  replaces: Opt(Type.Literal(true, { description: 'Debounce: the execution an earlier event of the window planned' })),
  retry_of: Opt(Str('A retry of this earlier delivery (`POST /executions/{id}/retry`)')),
}, { description: 'One delivery to one forward URL' });

const received = Type.Object({ event: record, endpoint: snapshot, executions: Type.Array(plan) });

export const INBOUND_EVENT_SCHEMAS = {
  InboundEventReceived: received,
  InboundEventReplayed: received,
  InboundDebounceOpened: Type.Object({
    window: Type.Object({
      endpoint_id: Str(), debounce_key: Str(), event_id: Str('The event that opened it'), opened_at: Time(), run_at: Time(),
      executions: StringMap('Forward URL → the window\'s execution for it'),
    }),
  }),
};
agree<Disagreeing<typeof INBOUND_EVENT_SCHEMAS>>();
