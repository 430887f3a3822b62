import type { ChannelFormat } from './request.ts';

/** The organization email's subject and text, with the link to the resource. */
export const email: ChannelFormat = (m, config) => [{ type: 'email', to: config.to!, subject: m.email.subject, text: m.email.text }];
