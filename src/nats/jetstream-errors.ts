/**
 * The two JetStream refusals that are answers, not failures: a guarded write that lost
 * to another writer, and a message that is not there. Every other error (a timeout, a
 * 503 during an election, a lost connection) means "unknown": the caller must retry,
 * never act as if the write lost or the message were absent.
 */
export function isWrongLastSequence(err: unknown): boolean {
  const e = err as { api_error?: { err_code?: number }; code?: unknown; message?: string };
  return e?.api_error?.err_code === 10071 || e?.code === 10071 || /wrong last sequence/i.test(String(e?.message));
}

/** 10037: a get found nothing; 10057 is a failed delete, an answer only when it says the message is not there. */
export function isNoMessage(err: unknown): boolean {
  const e = err as { api_error?: { err_code?: number }; code?: unknown; message?: string };
  const code = e?.api_error?.err_code ?? e?.code;
  const message = String(e?.message);
  return code === 10037 || (code === 10057 && /no message found|stream store EOF/i.test(message)) || /^no message found/i.test(message);
}
