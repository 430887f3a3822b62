import type { ChannelKind } from '../../commands/channel/kinds.ts';
import { discord } from './discord.ts';
import { email } from './email.ts';
import { googleChat } from './google-chat.ts';
import { gotify } from './gotify.ts';
import { mattermost } from './mattermost.ts';
import { ntfy } from './ntfy.ts';
import { opsgenie } from './opsgenie.ts';
import { pagerduty } from './pagerduty.ts';
import { pushover } from './pushover.ts';
import type { ChannelFormat } from './request.ts';
import { slack } from './slack.ts';
import { teams } from './teams.ts';
import { telegram } from './telegram.ts';
import { webhook } from './webhook.ts';

/** Each kind's format. */
export const FORMATS: Record<ChannelKind, ChannelFormat> = {
  email, webhook, slack, mattermost, google_chat: googleChat, discord, teams, telegram, ntfy, pagerduty, opsgenie, pushover, gotify,
};

/**
 * Kinds whose receiver folds a repeat into what it already has (PagerDuty's dedup_key,
 * Opsgenie's alias): a send cut short by a crash may be sent again without a second page.
 */
export const RECEIVER_DEDUPES: ReadonlySet<ChannelKind> = new Set(['pagerduty', 'opsgenie']);
