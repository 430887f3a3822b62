/**
 * An abort of one's own that also follows `parent`: a term of work can stop itself (a
 * lapsed lease, a fence) or be stopped with everything else. `release` unhooks it from
 * the parent once the work is over, so a long-lived parent keeps no listener per term.
 */
export function childAbort(parent: AbortSignal): { controller: AbortController; release: () => void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  parent.addEventListener('abort', onAbort, { once: true });
  if (parent.aborted) controller.abort();
  return { controller, release: () => parent.removeEventListener('abort', onAbort) };
}
