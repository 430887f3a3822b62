// The checks live with the commands (the endpoint decider uses them too); routes import them from here.
export { checkBodySize, checkHeaders, MAX_BODY_BYTES } from '../commands/payload-checks.ts';
