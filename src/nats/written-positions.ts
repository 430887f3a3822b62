/**
 * What crosses `SUBJECTS.written`, one line each: `<org> <seq>` (an EVENTS position a
 * write of the organization reached), `<org> inbound <seq>` (an inbound request stored
 * at that INBOUND sequence, for the router to record), `routed <seq>` (the router has
 * recorded INBOUND through that sequence, after announcing the EVENTS positions it wrote).
 */
export type Position =
  | { kind: 'events'; orgId: string; seq: number }
  | { kind: 'inbound'; orgId: string; seq: number }
  | { kind: 'routed'; seq: number };

export function positionText(p: Position): string {
  switch (p.kind) {
    case 'events':
      return `${p.orgId} ${p.seq}`;
    case 'inbound':
      return `${p.orgId} inbound ${p.seq}`;
    case 'routed':
      return `routed ${p.seq}`;
  }
}

export function parsePosition(text: string): Position | null {
  const parts = text.split(' ');
  const seq = Number(parts[parts.length - 1]);
  if (!(seq > 0)) return null;
  if (parts.length === 2) return parts[0] === 'routed' ? { kind: 'routed', seq } : { kind: 'events', orgId: parts[0]!, seq };
  if (parts.length === 3 && parts[1] === 'inbound') return { kind: 'inbound', orgId: parts[0]!, seq };
  return null;
}
