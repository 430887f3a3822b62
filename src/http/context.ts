import type { ScriptEngine } from '../scripts/engine.ts';
import type { Request, Response, NextFunction, RequestHandler } from 'express';
import type { CommandDeps } from '../commands/execute.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/connect.ts';
import type { Metrics } from '../lib/metrics.ts';
import type { Nats } from '../nats/connection.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { ReadYourWrites } from './read-your-writes.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { EndpointDirectory } from '../inbound/endpoint-directory.ts';
import type { HooksFor } from '../inbound/pipeline.ts';
import type { SecretBox } from '../nats/secret-box.ts';
import type { Health } from './health.ts';
import type { LiveFeeds } from '../live/feeds.ts';
import type { ChannelSender } from '../notifier/channels/send.ts';

export interface ApiDeps extends CommandDeps {
  config: Config;
  db: Db;
  nats: Nats;
  directory: Directory;
  /** Writes record their position; reads wait for the organization's (read-your-writes). */
  reads: ReadYourWrites;
  rateLimiter: RateLimiter;
  metrics: Metrics;
  endpoints: EndpointDirectory;
  secrets: SecretBox;
  hooks: HooksFor;
  health: Health;
  /** Runs and checks Lua scripts (src/scripts/). */
  scripts: ScriptEngine;
  /** The live feeds (`GET /live`) of this process. */
  live: LiveFeeds;
  /** Sends a channel's test message now (`POST /channels/{id}/test`). */
  channelSender: ChannelSender;
}

export interface AuthedRequest extends Request {
  orgId: string;
  /** The public id (`pk_…`) of the API key the request came with. */
  keyId: string;
}

/** Express 4 does not catch rejected promises; route them to the error middleware. */
export function handler(fn: (req: AuthedRequest, res: Response) => Promise<void>): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    fn(req as AuthedRequest, res).catch(next);
  };
}
