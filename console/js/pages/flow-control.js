// Flow-control keys: limits, what waits and what runs now (from the owners' memory), pause / resume.
import { api } from '../api.js';
import { badge, h, link } from '../dom.js';
import { listPage, pauseResumeButton } from './common.js';

/** A key's (or an endpoint's) limits in words. */
export const flowLimits = (k) => {
  const parts = [];
  if (k.parallelism !== null) parts.push(`${k.parallelism} at once`);
  if (k.rate !== null) parts.push(`${k.rate} per ${k.period}`);
  return parts.length ? parts.join(', ') : h('span', { class: 'muted' }, 'no task names it yet');
};

export function flowControlList(ctx) {
  const result = h('div', { class: 'action-result', role: 'status' });
  let redraw = async () => {};
  return listPage(ctx, {
    title: 'Flow control',
    load: async () => (await api('GET', '/flow-control')).data,
    empty: 'No flow-control keys yet: a task with flow_control: {key, parallelism, rate} makes one.',
    // What waits and runs changes with every execution of a key.
    match: (m) => m.kind === 'execution' || m.kind === 'task',
    columns: [
      { label: 'Key', cell: (k) => h('code', {}, k.key) },
      { label: 'Limits', cell: flowLimits },
      { label: 'Waiting', cell: (k) => String(k.waiting) },
      { label: 'In flight', cell: (k) => String(k.in_flight) },
      { label: 'State', cell: (k) => badge(k.paused ? 'paused' : 'active') },
      {
        label: 'Action',
        cell: (k) => pauseResumeButton(`/flow-control/${encodeURIComponent(k.key)}`, k.paused, result, () => redraw(), {
          pausedText: `Key ${k.key} paused: nothing of it starts, what waits stays`,
          resumedText: `Key ${k.key} resumed`,
        }),
      },
    ],
    above: result,
    onDraw: (draw) => {
      redraw = draw;
    },
  });
}

/** A task's key, linked to the keys page. */
export const flowControlFact = (flow) => (flow ? [h('code', {}, flow.key), ' ', link('(keys)', 'flow-control'), ' ', flowLimits(flow)] : null);
