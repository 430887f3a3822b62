import { FILTER_NAMES } from '../execution-filter.ts';

/** A bulk call's body: a required `filter` object of these properties, and the call's other fields. */
const bulkBody = <I extends string, F extends object, R extends object>(id: I, filter: F, filterDescription: string, rest: R) => ({
  $id: id,
  type: 'object',
  additionalProperties: false,
  required: ['filter'],
  properties: { filter: { type: 'object', additionalProperties: false, description: filterDescription, properties: filter }, ...rest },
} as const);

/** `POST /executions/retry`: the list's filters (`dead` defaults to true) and whether only to count. */
export const bulkRetrySchema = bulkBody(
  'BulkRetry',
  Object.fromEntries(FILTER_NAMES.map((name) => [name, name === 'dead' ? { type: 'boolean' } : { type: 'string', maxLength: 500 }])),
  'The filters of `GET /executions` (same names and values); `dead` defaults to true',
  { dry_run: { type: 'boolean', description: 'Only count the executions the job would retry: 200 `{data: {count}}`' } },
);

/** `POST /endpoints/{id}/events/replay`: which inbound events, to which forward URLs, or only their count. */
export const bulkReplaySchema = bulkBody(
  'BulkReplay',
  {
    received_after: { type: 'string', maxLength: 100, description: 'ISO 8601, or a duration such as `7d` meaning that long ago' },
    received_before: { type: 'string', maxLength: 100 },
    delivery_status: { type: 'string', description: '`failed`, `success` or `pending`: the event\'s worst delivery (among those no retry replaced)' },
    method: { type: 'string', maxLength: 20 },
  },
  'Which of the endpoint\'s inbound events of the last 30 days',
  {
    forward_urls: { type: ['array', 'null'], items: { type: 'string' }, maxItems: 100, description: 'A subset of the endpoint\'s forward URLs; left out or null: all' },
    dry_run: { type: 'boolean', description: 'Only count the events the job would replay: 200 `{data: {count}}`' },
  },
);

/** `POST /endpoints/{id}/forwards/enable`: the forward URL, and where a replay of what it missed starts. */
export const enableForwardSchema = {
  $id: 'EnableForward',
  type: 'object',
  additionalProperties: false,
  required: ['url'],
  properties: {
    url: { type: 'string', maxLength: 2048, description: 'One of the endpoint\'s forward URLs' },
    recover_since: { type: ['string', 'null'], maxLength: 100, description: 'ISO 8601, or a duration such as `7d` meaning that long ago: also replay, to this URL only, the endpoint\'s events received since then whose delivery to it did not succeed' },
  },
} as const;
