/**
 * The destination-health events of each aggregate, named once for the readers that
 * treat them all alike (the projector writes the state they carry; the live feed and
 * the notifier's counting pass most of them by).
 */
export const SCHEDULE_HEALTH_TYPES = ['ScheduleFailureCounted', 'ScheduleFailuresReset', 'ScheduleDisabled'] as const;
export const ENDPOINT_HEALTH_TYPES = ['EndpointForwardFailureCounted', 'EndpointForwardFailuresReset', 'EndpointForwardDisabled', 'EndpointForwardEnabled'] as const;
export type ScheduleHealthType = (typeof SCHEDULE_HEALTH_TYPES)[number];
export type EndpointHealthType = (typeof ENDPOINT_HEALTH_TYPES)[number];
