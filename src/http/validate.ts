import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { HEADER_NAME_PROBLEM } from '../commands/payload-checks.ts';
import { durationProblem } from '../lib/duration.ts';
import { unprocessable } from '../lib/errors.ts';
import { httpUrlProblem, instantProblem } from '../lib/input-checks.ts';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv) => Ajv;

// verbose: a format error carries the value, so its message can say what is wrong with it.
const ajv = new Ajv({ allErrors: false, strict: false, verbose: true });
addFormats(ajv);

/**
 * Formats whose check goes past the text's shape to what the service can act on. Each
 * gives the end of the error sentence for a value, or null when it is fine.
 */
const rfc3339 = fullFormats['date-time'] as { validate: (s: string) => boolean };
const problems: Record<string, (value: string) => string | null> = {
  // A run time: RFC 3339, then within the years and the horizon Date and the timers can hold.
  'date-time': (v) => (rfc3339.validate(v) ? instantProblem(v, Date.now()) : 'must be an RFC 3339 date-time such as 2030-01-31T09:00:00Z'),
  uri: httpUrlProblem,
  'jetcron-duration': durationProblem,
};
for (const [name, problem] of Object.entries(problems)) ajv.addFormat(name, { type: 'string', validate: (v: string) => problem(v) === null });

const compiled = new Map<object, ValidateFunction>();

function fieldOf(err: ErrorObject): string | null {
  const path = err.instancePath.replace(/^\//, '').replace(/\/(\d+)(?=\/|$)/g, '[$1]').replace(/\//g, '.');
  if (err.keyword === 'additionalProperties') {
    const extra = (err.params as { additionalProperty: string }).additionalProperty;
    return path ? `${path}.${extra}` : extra;
  }
  if (err.keyword === 'required') {
    const missing = (err.params as { missingProperty: string }).missingProperty;
    return path ? `${path}.${missing}` : missing;
  }
  return path || null;
}

function messageOf(err: ErrorObject, field: string | null): string {
  if (err.keyword === 'additionalProperties') return `unknown field "${field}"`;
  if (err.keyword === 'required') return `${field} is required`;
  if (err.keyword === 'anyOf' || err.keyword === 'type') {
    return `${field ?? 'body'} has the wrong type`;
  }
  if (err.keyword === 'format' && typeof err.data === 'string') {
    const problem = problems[(err.params as { format: string }).format]?.(err.data);
    if (problem) return `${field ?? 'body'} ${problem}`;
  }
  if (err.keyword === 'enum') return `${field ?? 'body'} must be one of ${(err.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
  // A header name that is no token: the deciders' words (src/commands/payload-checks.ts).
  if (err.keyword === 'pattern' && err.propertyName !== undefined && /headers$/.test(field ?? '')) return `${field} ${HEADER_NAME_PROBLEM}`;
  if (err.keyword === 'pattern' && /url/.test(field ?? '')) return `${field} must be an http or https URL`;
  if (err.keyword === 'pattern' && /delay|debounce$/.test(field ?? '')) return `${field} must be a number followed by s, m, h or d`;
  return `${field ?? 'body'} ${err.message ?? 'is invalid'}`;
}

/** Validates `body` against `schema`, throwing the contract's 422 with the offending field. */
export function validate<T>(schema: object, body: unknown): T {
  let fn = compiled.get(schema);
  if (!fn) compiled.set(schema, (fn = ajv.compile(schema)));
  if (fn(body)) return body as T;
  // anyOf errors list each branch; the most specific branch error names the problem best.
  const errors = fn.errors ?? [];
  const err = errors.find((e) => e.keyword !== 'anyOf' && e.keyword !== 'type') ?? errors[0]!;
  const field = fieldOf(err);
  throw unprocessable(messageOf(err, field), field);
}
