import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { unprocessable } from '../lib/errors.ts';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv) => Ajv;

const ajv = new Ajv({ allErrors: false, strict: false });
addFormats(ajv);

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
