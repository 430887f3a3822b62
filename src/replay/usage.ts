/** Where a projection's tables and checkpoint are unless `--schema` names another. */
export const DEFAULT_SCHEMA = 'analytics';

/** The replay's line of the CLI's usage (loaded without the replay's modules). */
export const REPLAY_USAGE = 'jetcron replay --projection FILE [--from-start] [--since ISO|DURATION] [--from-seq N] [--types A,B] [--org ORG_ID] [--follow] [--strict] [--schema NAME]';
