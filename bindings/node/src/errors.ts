/**
 * Errors. One table, built from `enum cairn_status`: a failed call throws a {@link CairnError}
 * whose `code` is the status name the library gives (`cairn_status_name`), following Node's
 * `err.code` convention.
 */
import { copyBytes, load, STATUS, type Out, type Pointer } from './ffi.js';
import { pathFromBuffer } from './paths.js';

/** The status names, as `cairn_status_name` spells them: `'NOT_FOUND'`, `'BUSY'`, ... */
export type ErrorCode = {
  [K in keyof typeof STATUS]: K extends `CAIRN_ERR_${infer N}` ? N : never;
}[keyof typeof STATUS];

/** Status numbers by code, and codes by status number. */
export const STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = Object.freeze(
  Object.fromEntries(
    Object.entries(STATUS)
      .filter(([k]) => k !== 'CAIRN_OK')
      .map(([k, v]) => [k.slice('CAIRN_ERR_'.length), v]),
  ) as Record<ErrorCode, number>,
);

/** Every error code, in status order. */
export const ERROR_CODES: readonly ErrorCode[] = Object.freeze(
  (Object.keys(STATUS_BY_CODE) as ErrorCode[]).sort((a, b) => STATUS_BY_CODE[a] - STATUS_BY_CODE[b]),
);

/** What a {@link CairnError} is made from. */
export interface CairnErrorInit {
  status: number;
  code: ErrorCode;
  path?: string | undefined;
  pathBytes?: Buffer | undefined;
  cause?: unknown;
}

/** An error reported by libcairn. */
export class CairnError extends Error {
  override name = 'CairnError';
  /** The stable name of the status (`'NOT_FOUND'`, `'BUSY'`, ...). */
  readonly code: ErrorCode;
  /** The `cairn_status` number. */
  readonly status: number;
  /** The path or id the error concerns (an escaped string when the name is not UTF-8). */
  readonly path: string | undefined;
  /** The same path as raw bytes. */
  readonly pathBytes: Buffer | undefined;

  constructor(message: string, init: CairnErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.path = init.path;
    this.pathBytes = init.pathBytes;
  }

  /** Whether `e` is a CairnError, optionally of one of the given codes. */
  static is(e: unknown, ...codes: ErrorCode[]): e is CairnError {
    return e instanceof CairnError && (codes.length === 0 || codes.includes(e.code));
  }
}

/** Thrown when a closed handle is used; `code` is Node's own `'ERR_USE_AFTER_CLOSE'`. */
export class UseAfterCloseError extends Error {
  override name = 'UseAfterCloseError';
  readonly code = 'ERR_USE_AFTER_CLOSE';
  constructor(what: string) {
    super(`${what} is closed`);
  }
}

/** The code for a status number (`'UNKNOWN'` names are kept as the library gives them). */
export function codeOf(status: number): ErrorCode {
  const lib = load();
  return String(lib.cairn_status_name(status)) as ErrorCode;
}

/**
 * The error for a failed status: reads and frees the `cairn_error` in `err` (if any). Call only
 * when `status` is not `CAIRN_OK`.
 */
export function takeError(status: number, err: Out | Pointer, cause?: unknown): CairnError {
  const lib = load();
  const ptr = Array.isArray(err) ? err[0] : err;
  const code = codeOf(status);
  let message = String(lib.cairn_status_str(status));
  let pathBytes: Buffer | undefined;
  if (ptr !== null && ptr !== undefined) {
    try {
      const m = copyBytes(lib.cairn_error_message(ptr));
      if (m.length > 0) message = m.toString('utf8');
      const p = copyBytes(lib.cairn_error_path(ptr));
      if (p.length > 0) pathBytes = p;
    } finally {
      lib.cairn_error_free(ptr);
    }
  }
  return new CairnError(message, {
    status,
    code,
    path: pathBytes && pathFromBuffer(pathBytes),
    pathBytes,
    cause,
  });
}

/** Throws the error for `status` unless it is `CAIRN_OK`. */
export function check(status: number, err: Out | Pointer): void {
  if (status !== STATUS.CAIRN_OK) throw takeError(status, err);
}
