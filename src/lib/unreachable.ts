/**
 * The end of an exhaustive `switch`: the compiler refuses a case left out, and a
 * value that still arrives at run time (an event type from a newer writer) is an error, not ignored.
 */
export function unreachable(value: never): never {
  const type = (value as { type?: unknown } | null)?.type;
  throw new Error(`unhandled case: ${typeof type === 'string' ? type : JSON.stringify(value)}`);
}
