import type { JsMsg } from '@nats-io/jetstream';
import { monitorPartition } from '../commands/partition/partition-of.ts';

/** `evt.<org>.monitor.<mon>` → its organization and monitor. */
export function monitorOfSubject(subject: string): { orgId: string; id: string } {
  const dot = subject.indexOf('.', 4);
  return { orgId: subject.slice(4, dot), id: subject.slice(dot + 9) };
}

/** Reads the last message of every monitor subject, handing each to `take`; ends with the log's end as it was. */
export type LastOfEachMonitor = (signal: AbortSignal, take: (m: JsMsg) => void) => Promise<number>;

/** How long the first ask waits for others to share its read. */
const GATHER_MS = 25;

interface Asker {
  partition: number;
  signal: AbortSignal;
  take: (m: JsMsg) => void;
  resolve: (end: number) => void;
  reject: (err: unknown) => void;
}

/**
 * The read a monitor partition's new owner makes after its claim (the last event of each
 * of its monitors' own subjects), shared by the owners of one process: every monitor
 * subject is read once for all the partitions asking together (at start, an API process
 * takes all of them at once), not once per partition, and each message goes to the owner
 * of its monitor's partition only. A read starts after every ask it serves was made (so
 * after each asker's claim); an ask made while a read is under way waits for the next,
 * which starts once that one ends. An asker whose signal aborts is answered at once; the
 * read goes on for the others, and stops when none is left.
 */
export function shareMonitorSubjectsRead(read: LastOfEachMonitor, partitions: number) {
  let waiting: Asker[] = [];
  let reading = false;

  const run = async () => {
    reading = true;
    const askers = waiting.filter((a) => !a.signal.aborted);
    waiting = [];
    const byPartition = new Map(askers.map((a) => [a.partition, a]));
    const stop = new AbortController();
    const left = () => {
      if (askers.every((a) => a.signal.aborted)) stop.abort();
    };
    for (const a of askers) a.signal.addEventListener('abort', left, { once: true });
    try {
      if (askers.length) {
        const end = await read(stop.signal, (m) => {
          const { orgId, id } = monitorOfSubject(m.subject);
          const asker = byPartition.get(monitorPartition(orgId, id, partitions));
          if (asker && !asker.signal.aborted) asker.take(m);
        });
        for (const a of askers) a.resolve(end);
      }
    } catch (err) {
      for (const a of askers) a.reject(err);
    } finally {
      for (const a of askers) a.signal.removeEventListener('abort', left);
      reading = false;
      if (waiting.length) void run();
    }
  };

  return {
    /** The last event of each of `partition`'s monitors' own subjects, to `take`; resolves with the log's end the read stopped at. */
    lastOfEach(partition: number, signal: AbortSignal, take: (m: JsMsg) => void): Promise<number> {
      return new Promise<number>((resolve, reject) => {
        // Stopped before it asked (a stop that came while its claim was stored): a read
        // leaves out aborted askers, and the listener below would never fire, so it is
        // answered now or it would wait forever, and its owner's term with it.
        if (signal.aborted) return resolve(0);
        const asker: Asker = { partition, signal, take, resolve, reject };
        // Answered at once when it stops: the owner then ends its term and reads nothing.
        signal.addEventListener('abort', () => resolve(0), { once: true });
        waiting.push(asker);
        // Asks of the next few milliseconds go in one read (the claims of a process's start
        // come one after another); with a read under way, in the next one.
        if (!reading && waiting.length === 1) setTimeout(() => void (reading || run()), GATHER_MS);
      });
    },
  };
}
