/**
 * What `import … from 'jetcron'` gives a projection file (package.json `exports`):
 * everything an analyst writes a projection with. docs/analysts.md shows how.
 */
export { defineProjection, type Projection } from './projection.ts';
export { sql, type Kysely, type Transaction } from 'kysely';
export type { StoredEvent } from '../commands/envelope.ts';
export type { EventOf, EventType, JetcronEvent } from '../commands/events.ts';
