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
  },
} as const;
