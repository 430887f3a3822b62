import { eventually, type Api } from './service.ts';

const FINAL = ['success', 'failed', 'timeout', 'cancelled'];

/** An inbound event's row as `GET /endpoints/{id}/events` lists it, once `ready` says so. */
export const inboundEventRow = (api: Api, endpointId: string, eventId: string, ready: (row: any) => boolean = () => true) =>
  eventually(async () => {
    const rows = (await api('GET', `/endpoints/${endpointId}/events`)).body.data as any[];
    const row = rows.find((r) => r.id === eventId);
    return row && ready(row) ? row : null;
  }, 20_000);

/** Every execution of the event has ended. */
export const settled = (row: any) => row.executions.length > 0 && row.executions.every((x: any) => FINAL.includes(x.status));
