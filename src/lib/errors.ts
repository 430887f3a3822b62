/** The one error class the HTTP layer turns into the contract's error body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const badRequest = (message: string, field: string | null = null) => new ApiError(400, message, field);
export const unprocessable = (message: string, field: string | null = null) => new ApiError(422, message, field);
export const notFound = (what = 'Not found') => new ApiError(404, what);
export const forbidden = (message: string, field: string | null = null) => new ApiError(403, message, field);
export const conflict = (message: string) => new ApiError(409, message);
