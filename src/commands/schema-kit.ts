import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { EventOf, EventType } from './events.ts';

/**
 * The words the event schemas are written in (TypeBox: JSON Schema objects that carry
 * their TypeScript type). Each aggregate's `schemas.ts` describes the `data` of its
 * events beside its event union, and `Disagreeing` makes the compiler check that both
 * say the same: a field added to a type and not to its schema (or the reverse) is a
 * type error naming the event. The catalogue (src/commands/catalogue.ts) is built from
 * these objects, so it cannot drift from the code either.
 */
export { Type };
export type { TSchema };

export const Str = (description?: string) => Type.String(description ? { description } : {});
export const Int = (description?: string) => Type.Integer(description ? { description } : {});
export const Bool = (description?: string) => Type.Boolean(description ? { description } : {});
/** An ISO 8601 time, as every event writes times (`Date#toISOString`). */
export const Time = (description?: string) => Type.String({ format: 'date-time', ...(description ? { description } : {}) });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
export const Opt = <T extends TSchema>(schema: T) => Type.Optional(schema);
/** A resource's notification channels (`chn_…`): null or absent = every channel of its organization, [] = none. */
export const ChannelIds = () => Type.Optional(Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'The notification channels it notifies; null or absent = every channel of the organization, [] = none' }));
export const StringMap = (description?: string) => Type.Record(Type.String(), Type.String(), description ? { description } : {});
/** One of a few strings: `{type: string, enum}` in the document. */
export const OneOf = <const L extends readonly string[]>(values: L, description?: string) =>
  Type.Unsafe<L[number]>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });
/** A body as tasks and schedules hold it: text, a JSON object or array, or none. */
export const Body = () => Type.Union([Type.String(), Type.Record(Type.String(), Type.Unknown()), Type.Array(Type.Unknown()), Type.Null()]);

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

/** The event types of `S` whose schema and TypeScript type disagree (never, when all agree). */
export type Disagreeing<S extends { [T in keyof S]: TSchema }> = {
  [T in keyof S & EventType]: Same<Static<S[T]>, EventOf<T>['data']> extends true ? never : T
}[keyof S & EventType];

/** Compiles only when `D` is never: `agree<Disagreeing<typeof SCHEMAS>>()` (the error names the events whose schema is wrong). */
export const agree = <D extends never>(): void => {};
