import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

/** What tells a process apart from a later one that got the same pid. */
export interface ProcessIdentity {
  /** When it started: boot id and clock ticks since boot on Linux, `ps`'s lstart elsewhere. */
  started: string;
  /** Its command line, arguments joined by single spaces. */
  command: string;
}

/** The identity of the process running under `pid`; undefined when there is none or only a zombie. */
export function processIdentity(pid: number): ProcessIdentity | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return hasProcfs() ? fromProcfs(pid) : fromPs(pid);
}

/** Whether `text` is one whole argument of the command line (a path must not match a longer path). */
export function commandMentions(identity: ProcessIdentity, text: string): boolean {
  return ` ${identity.command} `.includes(` ${text} `);
}

let procfs: boolean | undefined;
function hasProcfs(): boolean {
  procfs ??= existsSync('/proc/self/stat');
  return procfs;
}

let boot: string | undefined;
// Start times count from boot: after a reboot the same pid and tick count name another process.
function bootId(): string {
  if (boot === undefined) {
    try {
      boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      boot = '';
    }
  }
  return boot;
}

function fromProcfs(pid: number): ProcessIdentity | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses; the fields after the last ')' are fixed.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // A zombie has freed its ports and files; only its parent's wait() is missing.
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
    return { started: `${bootId()}:${fields[19]}`, command };
  } catch {
    return undefined;
  }
}

function fromPs(pid: number): ProcessIdentity | undefined {
  const result = spawnSync('ps', ['-o', 'stat=', '-o', 'lstart=', '-o', 'args=', '-p', String(pid)], { encoding: 'utf8' });
  if (result.status !== 0 || typeof result.stdout !== 'string') return undefined;
  // stat, then lstart as "Mon Nov 23 10:40:05 2026", then the arguments.
  const match = /^\s*(\S+)\s+(\S+\s+\S+\s+\d+\s+[\d:]+\s+\d+)\s+(.*)$/.exec(result.stdout.trim());
  if (!match || match[1]!.startsWith('Z')) return undefined;
  return { started: match[2]!.replace(/\s+/g, ' '), command: match[3]!.trim() };
}
