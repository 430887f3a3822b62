/** The executions page written as text: the same JSON, key for key, as the row serializer. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isoFromPostgres, pageJson, pageRowJson, type PageRow } from '../src/http/execution-page.ts';
import { executionRow } from '../src/http/serializers.ts';

test('Postgres timestamptz text becomes toISOString()\'s form, milliseconds truncated like a Date', () => {
  assert.equal(isoFromPostgres('2026-11-25 18:45:32+00'), '2026-11-25T18:45:32.000Z');
  assert.equal(isoFromPostgres('2026-11-25 18:45:32.1+00'), '2026-11-25T18:45:32.100Z');
  assert.equal(isoFromPostgres('2026-11-25 18:45:32.123+00'), '2026-11-25T18:45:32.123Z');
  assert.equal(isoFromPostgres('2026-11-25 18:45:32.123987+00'), '2026-11-25T18:45:32.123Z');
  // A server in another zone: through Date, same instant.
  assert.equal(isoFromPostgres('2026-11-25 19:45:32.5+01'), '2026-11-25T18:45:32.500Z');
  assert.equal(isoFromPostgres(null), null);
});

test('a page row is executionRow of the same row, key for key and in the same order', () => {
  const text: PageRow = {
    id: 'exe_1', status: 'failed', status_code: 500, error_message: 'HTTP 500 "quoted" \\ and\nnewline é 🚀', attempt: 2, duration_ms: 17,
    scheduled_for: '2026-11-25 18:45:32.1+00', started_at: '2026-11-25 18:45:32.123+00', finished_at: null,
    source_id: 'tsk_1', source_name: 'name with "quotes"', source_type: 'task', url: 'https://example.com/a?b=c&d=\u2028',
    retry_of: 'exe_0', retried_by: null,
    created_at: '2026-11-25 18:45:30+00', updated_at: '2026-11-25 18:45:33.999+00',
  };
  const dates = {
    ...text,
    scheduled_for: new Date('2026-11-25T18:45:32.100Z'), started_at: new Date('2026-11-25T18:45:32.123Z'), finished_at: null,
    created_at: new Date('2026-11-25T18:45:30.000Z'), updated_at: new Date('2026-11-25T18:45:33.999Z'),
  };
  assert.equal(pageRowJson(text), JSON.stringify(executionRow(dates)));
  const nulls: PageRow = { ...text, status_code: null, error_message: null, duration_ms: null, started_at: null, status: 'pending', attempt: 0 };
  assert.equal(pageRowJson(nulls), JSON.stringify(executionRow({ ...dates, status_code: null, error_message: null, duration_ms: null, started_at: null, status: 'pending', attempt: 0 })));
});

test('the page: at most `limit` rows, has_more from the extra one, limit and offset', () => {
  const row = (n: number): PageRow => ({
    id: `exe_${n}`, status: 'success', status_code: 200, error_message: null, attempt: 1, duration_ms: 1, scheduled_for: '2026-11-25 18:45:32+00',
    started_at: null, finished_at: null, source_id: 't', source_name: 'n', source_type: 'task', url: 'u', retry_of: null, retried_by: null, created_at: '2026-11-25 18:45:32+00', updated_at: '2026-11-25 18:45:32+00',
  });
  const full = JSON.parse(pageJson([row(1), row(2), row(3)], 2, 4));
  assert.deepEqual(full.data.map((r: { id: string }) => r.id), ['exe_1', 'exe_2']);
  assert.equal(full.has_more, true);
  assert.equal(full.limit, 2);
  assert.equal(full.offset, 4);
  const last = JSON.parse(pageJson([row(1)], 2, 0));
  assert.equal(last.has_more, false);
  assert.deepEqual(JSON.parse(pageJson([], 50, 0)), { data: [], has_more: false, limit: 50, offset: 0 });
});
