/** `--name value` and `--flag` pairs after the positional words. */
export function parseArgs(argv: string[]): { words: string[]; flags: Map<string, string> } {
  const words: string[] = [];
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      if (eq > 0) flags.set(a.slice(2, eq), a.slice(eq + 1));
      else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) flags.set(a.slice(2), argv[++i]!);
      else flags.set(a.slice(2), 'true');
    } else words.push(a);
  }
  return { words, flags };
}

/** A command line that cannot be run as given: the CLI prints it with the usage and exits 2. */
export class UsageError extends Error {}

/** Refuses a flag the command does not take, and a value given to one that takes none. */
export function checkFlags(command: string, flags: Map<string, string>, valued: readonly string[], booleans: readonly string[]): void {
  for (const [name, value] of flags) {
    if (booleans.includes(name)) {
      if (value !== 'true') throw new UsageError(`--${name} takes no value (got "${value}")`);
    } else if (!valued.includes(name)) throw new UsageError(`${command} has no flag --${name}`);
    else if (value === 'true') throw new UsageError(`--${name} needs a value`);
  }
}
