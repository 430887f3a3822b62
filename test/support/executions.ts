import assert from 'node:assert/strict';
import { eventually, type Api } from './service.ts';

/** An organization's execution by id, one once it has ended, and a task created (201 asserted). */
export function executionHelpers(api: () => Api) {
  const execution = async (id: string) => (await api()('GET', `/executions/${id}`)).body.data;
  const finished = (id: string) =>
    eventually(async () => {
      const e = await execution(id);
      return ['success', 'failed', 'timeout'].includes(e?.status) ? e : null;
    });
  const create = async (body: Record<string, unknown>) => {
    const res = await api()('POST', '/tasks', body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data;
  };
  return { execution, finished, create };
}
