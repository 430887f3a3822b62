import type { ChannelFormat } from './request.ts';

/** The organization webhook's JSON, signed by the sender as every jetcron request is. */
export const webhook: ChannelFormat = (m, config) => [{ type: 'signed', url: config.url!, body: JSON.stringify(m.payload) }];
