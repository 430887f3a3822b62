import { emptyText, nullableUrl } from './common.ts';

export const updateOrganizationSchema = {
  $id: 'UpdateOrganization',
  type: 'object',
  additionalProperties: false,
  properties: {
    notification_email: { anyOf: [{ type: 'string', format: 'email', maxLength: 320 }, { type: 'null' }, emptyText] },
    notification_webhook_url: nullableUrl,
    notify_on_failure: { type: 'boolean' },
    notify_on_recovery: { type: 'boolean' },
    auto_disable_after: { type: ['string', 'null'], maxLength: 20, description: 'Destination health: how long a schedule or forward URL fails (and at least 3 times in a row) before it is disabled; a duration such as `5d`; null: never. Default `5d`' },
  },
} as const;
