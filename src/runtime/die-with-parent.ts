import { spawnSync } from 'node:child_process';
import { platform } from 'node:os';

export interface Command {
  file: string;
  args: string[];
}

/**
 * `file args`, wrapped so that where the OS allows (Linux with util-linux's setpriv) the
 * child gets `signal` when this process dies, even by SIGKILL; unchanged elsewhere.
 *
 * setpriv sets PR_SET_PDEATHSIG in the child itself and then execs `file`. That matters:
 * the kernel clears the setting on a uid/gid change, and Node's `uid` spawn option
 * changes ids before the exec, so the setting must come after it (in setpriv), not before.
 * The signal fires when the thread that forked the child dies; Node spawns from its main
 * thread, whose end is the process's end.
 */
export function dieWithParent(file: string, args: readonly string[], signal: NodeJS.Signals): Command {
  return hasSetpriv() ? { file: 'setpriv', args: ['--pdeathsig', signal, '--', file, ...args] } : { file, args: [...args] };
}

let setpriv: boolean | undefined;

// Checked once: setpriv may be missing, or too old (before util-linux 2.33) for --pdeathsig.
function hasSetpriv(): boolean {
  if (setpriv === undefined) {
    const probe = platform() === 'linux' ? spawnSync('setpriv', ['--pdeathsig', 'SIGTERM', '--', 'setpriv', '--version'], { stdio: 'ignore' }) : undefined;
    setpriv = probe?.status === 0;
  }
  return setpriv;
}
