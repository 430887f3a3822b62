import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SUBJECTS } from '../streams/subjects.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { jobWakeups } from '../src/jobs/job-wakeups.ts';
import { startTestNats } from './support/nats.ts';

// The bulk jobs' worker between polls: an accepted job wakes it once the projector has it.
describe('the bulk jobs worker wakes for an accepted job', () => {
  let server: { url: string; stop(): Promise<void> };
  let worker: Nats;
  let api: Nats;
  const HOUR = 3_600_000; // a poll no test waits for: only a wake ends these idles
  before(async () => {
    server = await startTestNats();
    worker = await connectNats(server.url, 'worker');
    api = await connectNats(server.url, 'api');
  });
  after(async () => {
    await worker.close();
    await api.close();
    await server.stop();
  });
  const flushed = async () => {
    await api.nc.flush();
    await worker.nc.flush();
  };

  test('an accepted job wakes the worker once the projector has passed its sequence, not before', async () => {
    const w = jobWakeups(worker, HOUR);
    await worker.nc.flush();
    let idled = false;
    const idle = w.idle(new AbortController().signal).then(() => void (idled = true));
    api.nc.publish(SUBJECTS.jobAccepted, 'org_1 40');
    api.nc.publish(SUBJECTS.projected, '39');
    await flushed();
    await new Promise((r) => setImmediate(r));
    assert.equal(idled, false, 'the projector has not reached the job yet');
    api.nc.publish(SUBJECTS.projected, '40');
    await idle;
    w.close();
  });

  test('a wake that came while the worker was busy ends its next idle at once; an abort ends one too', async () => {
    const w = jobWakeups(worker, HOUR);
    await worker.nc.flush();
    api.nc.publish(SUBJECTS.projected, '100');
    api.nc.publish(SUBJECTS.jobAccepted, 'org_1 90');
    await flushed();
    await new Promise((r) => setImmediate(r));
    await w.idle(new AbortController().signal);
    const stop = new AbortController();
    const idle = w.idle(stop.signal);
    stop.abort();
    await idle;
    w.close();
  });
});
