/** What one outbound HTTP exchange gave: the input of the attempt rules (outcome, host signal). */
export type OutboundResult =
  | {
      kind: 'response';
      statusCode: number;
      headers: Record<string, string>;
      /** The body as text (UTF-8, undecodable bytes replaced): for matching. */
      body: string;
      /** The body's bytes as received (up to the cap): what is stored. */
      bytes: Buffer;
      truncated: boolean;
      startedAt: Date;
      durationMs: number;
    }
  | {
      kind: 'error';
      error: 'timeout' | 'connection' | 'refused_target' | 'invalid_url';
      message: string;
      startedAt: Date;
      durationMs: number;
    };
