/** The one error class the HTTP layer turns into the contract's error body. */
export class ApiError extends Error {
  readonly status: number;
  readonly field: string | null;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, field: string | null = null, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.field = field;
    this.headers = headers;
  }
}

export const badRequest = (message: string, field: string | null = null) => new ApiError(400, message, field);
export const unprocessable = (message: string, field: string | null = null) => new ApiError(422, message, field);
export const notFound = (what = 'Not found') => new ApiError(404, what);
export const forbidden = (message: string, field: string | null = null) => new ApiError(403, message, field);
export const conflict = (message: string, field: string | null = null) => new ApiError(409, message, field);

/** An admin command that cannot do what it was asked (no such table, a projection that is not one): the CLI prints the message and exits 1. */
export class CommandError extends Error {}
