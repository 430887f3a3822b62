import type { ChildProcess } from 'node:child_process';

/** Calls `onLine` with each whole line a child writes to stdout or stderr (spawned with both piped). */
export function onChildLines(child: ChildProcess, onLine: (line: string) => void): void {
  for (const stream of [child.stdout!, child.stderr!]) {
    let rest = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const parts = (rest + chunk).split('\n');
      rest = parts.pop()!;
      for (const l of parts) onLine(l);
    });
  }
}
