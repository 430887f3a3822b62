import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createMetrics } from '../src/lib/metrics.ts';
import { parsePrometheusText, sampleValue } from './support/prometheus-text.ts';

// The reader the /metrics tests rely on: it must refuse what Prometheus would refuse,
// or a test that parses /metrics proves nothing.

const VALID = [
  '# HELP jobs_total Jobs done, with a \\\\ and a \\n in the help',
  '# TYPE jobs_total counter',
  'jobs_total{kind="a",path="x\\"y\\\\z\\n"} 3',
  'jobs_total{kind="b",} 1e3',
  '',
  '# TYPE wait_seconds histogram',
  'wait_seconds_bucket{le="0.1"} 1',
  'wait_seconds_bucket{le="1"} 2',
  'wait_seconds_bucket{le="+Inf"} 2',
  'wait_seconds_sum 0.6',
  'wait_seconds_count 2',
  '# a comment',
  'temperature -3.5 1700000000000',
  'lag_mean Nan',
  '',
].join('\n');

describe('the Prometheus text reader', () => {
  test('reads families, types, help, escaped labels and values', () => {
    const f = parsePrometheusText(VALID);
    assert.equal(f.get('jobs_total')?.type, 'counter');
    assert.equal(f.get('jobs_total')?.help, 'Jobs done, with a \\ and a \n in the help');
    assert.equal(sampleValue(f, 'jobs_total', { kind: 'a', path: 'x"y\\z\n' }), 3);
    assert.equal(sampleValue(f, 'jobs_total', { kind: 'b' }), 1000);
    assert.equal(f.get('wait_seconds')?.samples.length, 5);
    assert.equal(sampleValue(f, 'wait_seconds_bucket', { le: '+Inf' }), 2);
    assert.equal(f.get('temperature')?.type, 'untyped');
    assert.ok(Number.isNaN(sampleValue(f, 'lag_mean')));
  });

  const broken: Array<[string, string, RegExp]> = [
    ['no final newline', 'up 1', /newline/],
    ['a bad metric name', '1up 1\n', /not a sample|bad metric name/],
    ['an unquoted label value', 'up{a=b} 1\n', /not quoted/],
    ['an unknown escape', 'up{a="\\t"} 1\n', /bad escape/],
    ['a value that is no number', 'up one\n', /not a sample value/],
    ['TYPE after samples', 'up 1\n# TYPE up gauge\n', /TYPE after samples/],
    ['an unknown type', '# TYPE up meter\n', /unknown type/],
    ['a family split in two', 'a 1\nb 1\na{x="1"} 2\n', /not together/],
    ['a series twice', 'up{a="1"} 1\nup{a="1"} 2\n', /twice/],
    ['a negative counter', '# TYPE c_total counter\nc_total -1\n', /negative/],
    ['buckets out of order', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', /increasing/],
    ['buckets not cumulative', '# TYPE h histogram\nh_bucket{le="0.5"} 2\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n', /cumulative/],
    ['no +Inf bucket', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n', /\+Inf/],
    ['+Inf differs from _count', '# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 2\n', /differs/],
  ];
  for (const [what, text, message] of broken) {
    test(`refuses ${what}`, () => assert.throws(() => parsePrometheusText(text), message));
  }

  test("prom-client's output through createMetrics reads back with the types and values recorded", async () => {
    const m = createMetrics({ processMetrics: false });
    m.executions.inc({ source_type: 'task', status: 'success' });
    m.attemptDuration.observe({ source_type: 'task', outcome: 'failed' }, 0.2);
    m.consumerLag.readFrom(() => [[{ consumer: 'projector' }, 7]]);
    const f = parsePrometheusText(await m.render());
    assert.equal(f.get('jetcron_executions_total')?.type, 'counter');
    assert.equal(sampleValue(f, 'jetcron_executions_total', { source_type: 'task', status: 'success' }), 1);
    assert.equal(f.get('jetcron_attempt_duration_seconds')?.type, 'histogram');
    assert.equal(sampleValue(f, 'jetcron_attempt_duration_seconds_bucket', { source_type: 'task', outcome: 'failed', le: '0.25' }), 1);
    assert.equal(sampleValue(f, 'jetcron_attempt_duration_seconds_bucket', { source_type: 'task', outcome: 'failed', le: '0.1' }), 0);
    assert.equal(sampleValue(f, 'jetcron_consumer_lag', { consumer: 'projector' }), 7);
    // A gauge no part of this process reads from is not shown at all.
    assert.equal(f.has('jetcron_host_blocks_active'), false);
  });
});
