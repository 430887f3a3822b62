// Which page each hash path shows. `section` marks the nav link that is current.
import { channelDetail, channelEdit, channelNew, channelsList } from './pages/channels.js';
import { endpointDetail, endpointEdit, endpointNew, endpointsList, inboundEventDetail } from './pages/endpoints.js';
import { executionDetail, executionsList } from './pages/executions.js';
import { failuresPage } from './pages/failures.js';
import { flowControlList } from './pages/flow-control.js';
import { monitorDetail, monitorEdit, monitorNew, monitorsList } from './pages/monitors.js';
import { organizationPage } from './pages/organization.js';
import { overviewPage } from './pages/overview.js';
import { scheduleDetail, scheduleEdit, scheduleNew, schedulesList } from './pages/schedules.js';
import { taskDetail, taskEdit, taskNew, tasksList } from './pages/tasks.js';

const r = (path, section, render) => ({ pattern: path === '' ? [] : path.split('/'), section, render });

export const ROUTES = [
  r('', 'overview', overviewPage),
  r('executions', 'executions', executionsList),
  r('executions/:id', 'executions', executionDetail),
  r('failures', 'failures', failuresPage),
  r('tasks', 'tasks', tasksList),
  r('tasks/new', 'tasks', taskNew),
  r('tasks/:id', 'tasks', taskDetail),
  r('tasks/:id/edit', 'tasks', taskEdit),
  r('schedules', 'schedules', schedulesList),
  r('schedules/new', 'schedules', scheduleNew),
  r('schedules/:id', 'schedules', scheduleDetail),
  r('schedules/:id/edit', 'schedules', scheduleEdit),
  r('monitors', 'monitors', monitorsList),
  r('monitors/new', 'monitors', monitorNew),
  r('monitors/:id', 'monitors', monitorDetail),
  r('monitors/:id/edit', 'monitors', monitorEdit),
  r('endpoints', 'endpoints', endpointsList),
  r('endpoints/new', 'endpoints', endpointNew),
  r('endpoints/:id', 'endpoints', endpointDetail),
  r('endpoints/:id/edit', 'endpoints', endpointEdit),
  r('endpoints/:id/events/:eventId', 'endpoints', inboundEventDetail),
  r('channels', 'channels', channelsList),
  r('channels/new', 'channels', channelNew),
  r('channels/:id', 'channels', channelDetail),
  r('channels/:id/edit', 'channels', channelEdit),
  r('flow-control', 'flow-control', flowControlList),
  r('organization', 'organization', organizationPage),
];
