import type { EventStore } from '../commands/store.ts';
import type { OutboundClient } from '../dispatchers/outbound-client.ts';
import type { Clock } from '../lib/clock.ts';
import type { Nats } from '../nats/connection.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { startDeliverer, type DelivererDeps } from './deliverer.ts';
import { createMailer, parseSmtpUrl, type Mailer } from './mailer.ts';
import { ensureCheckpoint, startNotifyReader } from './reader.ts';
import { defaultResolvers } from './sources.ts';
import { createChannelDirectory } from './channel-directory.ts';
import { createChannelSender } from './channels/send.ts';
import { openSendLedger } from './send-ledger.ts';
import type { Sealer } from '../lib/sealed-secrets.ts';

export interface NotifierDeps {
  nats: Nats;
  store: EventStore;
  directory: Directory;
  outbound: OutboundClient;
  clock: Clock;
  /** SMTP_URL; undefined = email off. */
  smtpUrl: string | undefined;
  owner: string;
  log: (m: string) => void;
  supervisor: Supervisor;
  /** Deliveries in flight per process. */
  concurrency?: number;
  /** Opens the channels' sealed secrets (the service's secret box). */
  secrets: Sealer;
  /** `{root_url}`: what channel messages link to (read when a notification is planned). */
  rootUrl: () => string;
  onTry?: DelivererDeps['onTry'];
}

/**
 * The notifier role: the single active reader that decides notifications (lease
 * `notifier`) and, in every notifier process, the deliverer that sends them.
 */
export async function startNotifier(deps: NotifierDeps) {
  let mailer: Mailer | null = null;
  if (deps.smtpUrl) {
    const smtp = parseSmtpUrl(deps.smtpUrl);
    mailer = createMailer(smtp);
    deps.log(`notifier: email through ${smtp.display}`);
  } else {
    deps.log('notifier: SMTP_URL is not set, so email notifications are off (webhooks still go out)');
  }
  // Before anything is read: a first start begins at the end of the log.
  await ensureCheckpoint(deps.nats, deps.log);
  const channels = createChannelDirectory(deps.nats, deps.store);
  const reader = startNotifyReader({
    nats: deps.nats,
    directory: deps.directory,
    clock: deps.clock,
    owner: deps.owner,
    log: deps.log,
    supervisor: deps.supervisor,
    resolvers: defaultResolvers(deps.store),
    emailEnabled: mailer !== null,
    channels: (orgId) => channels.channels(orgId),
    knownChannels: (orgId) => channels.known(orgId),
    rootUrl: deps.rootUrl,
    store: deps.store,
  });
  const deliverer = startDeliverer({
    nats: deps.nats,
    store: deps.store,
    directory: deps.directory,
    outbound: deps.outbound,
    mailer,
    channels: createChannelSender({ outbound: deps.outbound, mailer, box: deps.secrets, directory: deps.directory, clock: deps.clock }),
    ledger: await openSendLedger(deps.nats),
    clock: deps.clock,
    concurrency: deps.concurrency ?? 64,
    log: deps.log,
    supervisor: deps.supervisor,
    onTry: deps.onTry,
  });
  return {
    async stop() {
      await reader.stop();
      await deliverer.stop();
      channels.close();
      mailer?.close();
    },
  };
}
