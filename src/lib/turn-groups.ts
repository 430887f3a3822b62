/** One group: what its members added, and its stored position once written. */
export interface TurnGroup<T> {
  /** Fresh per group (`newId`): what writers name a commit or a message after. */
  id: string;
  key: string;
  items: T[];
  /** Members taken (each may add several items, or none). */
  count: number;
  bytes: number;
  /** A second measure with its own limit (`maxHead`): what the group's message header takes. */
  head: number;
  /** Resolves with what `write` resolved with; rejects for every member when it fails. */
  stored: Promise<number>;
}

/**
 * Writes of one turn of the event loop gathered per key into groups, each written as
 * one message at the end of the turn (`setImmediate`), in the order the groups opened.
 * A group closes at `maxCount` members, `maxBytes` or `maxHead` (a member alone always gets one);
 * the next member of its key opens another. A group that took no item is not written.
 */
export function createTurnGroups<T>(
  limits: { maxCount: number; maxBytes: number; maxHead?: number },
  newGroupId: () => string,
  write: (group: TurnGroup<T>) => Promise<number>,
) {
  /** Each key's group still taking members this turn. */
  let open = new Map<string, TurnGroup<T>>();
  /** Every group of this turn, full ones included, in the order they opened. */
  let turn: Array<{ group: TurnGroup<T>; store: (n: number) => void; fail: (err: unknown) => void }> = [];

  const flush = () => {
    const groups = turn;
    turn = [];
    open = new Map();
    for (const g of groups) if (g.group.items.length) write(g.group).then(g.store, g.fail);
  };

  const opened = (key: string): TurnGroup<T> => {
    let store: (n: number) => void = () => {};
    let fail: (err: unknown) => void = () => {};
    const stored = new Promise<number>((resolve, reject) => {
      store = resolve;
      fail = reject;
    });
    // Awaited by each member; none may go unhandled if every member failed before joining.
    stored.catch(() => {});
    const group: TurnGroup<T> = { id: newGroupId(), key, items: [], count: 0, bytes: 0, head: 0, stored };
    open.set(key, group);
    if (turn.push({ group, store, fail }) === 1) setImmediate(flush);
    return group;
  };

  return {
    /** The group of `key` with room for a member of about `size` bytes (`head` of header); the caller adds to it. */
    join(key: string, size = 0, head = 0): TurnGroup<T> {
      const g = open.get(key);
      const full = !g || g.count >= limits.maxCount || (g.count > 0 && (g.bytes + size > limits.maxBytes || g.head + head > (limits.maxHead ?? Infinity)));
      return full ? opened(key) : g;
    },
  };
}
