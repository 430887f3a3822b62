import { FILTER_NAMES } from '../execution-filter.ts';

/** `POST /executions/retry`: the list's filters (`dead` defaults to true) and whether only to count. */
export const bulkRetrySchema = {
  $id: 'BulkRetry',
  type: 'object',
  additionalProperties: false,
  required: ['filter'],
  properties: {
    filter: {
      type: 'object',
      additionalProperties: false,
      description: 'The filters of `GET /executions` (same names and values); `dead` defaults to true',
      properties: Object.fromEntries(FILTER_NAMES.map((name) => [name, name === 'dead' ? { type: 'boolean' } : { type: 'string', maxLength: 500 }])),
    },
    dry_run: { type: 'boolean', description: 'Only count the executions the job would retry: 200 `{data: {count}}`' },
  },
} as const;
