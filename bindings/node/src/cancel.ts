/**
 * Cancellation: {@link CancelToken} wraps `cairn_cancel`, and `withCancel` bridges an
 * `AbortSignal` (and/or a token) to the native token an operation is given.
 */
import { CairnError, check, takeError } from './errors.js';
import { load, STATUS, type Out, type Pointer } from './ffi.js';
import { acquire, NativeHandle } from './handle.js';

/**
 * A cancellation token (`cairn_cancel`). Pass it as `cancel` to any number of operations;
 * `cancel()` stops those still running (they reject with `'CANCELLED'`) and every later one.
 */
export class CancelToken extends NativeHandle {
  #cancelled = false;
  readonly #linked = new Set<CancelToken>();

  constructor() {
    const lib = load();
    const out: Out = [null];
    const err: Out = [null];
    check(lib.cairn_cancel_new(out, err), err);
    super(out[0] as bigint, (p) => lib.cairn_cancel_free(p), 'CancelToken');
  }

  /** Whether `cancel()` was called. */
  get cancelled(): boolean {
    return this.#cancelled;
  }

  /** Cancels. Safe to call any number of times, and from an abort listener. */
  cancel(): void {
    if (this.#cancelled) return;
    load().cairn_cancel_cancel(this.ptr);
    this.#cancelled = true;
    for (const t of this.#linked) t.cancel();
  }

  /** @internal Cancels `other` too while it is linked. */
  link(other: CancelToken): () => void {
    if (this.#cancelled) other.cancel();
    this.#linked.add(other);
    return () => this.#linked.delete(other);
  }

  /** A token cancelled when `signal` aborts (close it when done). */
  static fromSignal(signal: AbortSignal): CancelToken {
    const t = new CancelToken();
    if (signal.aborted) t.cancel();
    else signal.addEventListener('abort', () => t.closed || t.cancel(), { once: true });
    return t;
  }
}

/** The error for an operation stopped before it started. */
function cancelledBeforeStart(cause: unknown): CairnError {
  const status = STATUS.CAIRN_ERR_CANCELLED;
  return new CairnError('cancelled before it started', { status, code: 'CANCELLED', cause });
}

export interface CancelScope {
  /** The native token to pass (NULL when the call has neither signal nor token). */
  ptr: Pointer;
  /** The error for a failed status, with the signal's reason as `cause` when it aborted. */
  error(status: number, err: Out): CairnError;
  /** Ends the scope: unlinks, frees the call's own token once the call is done with it. */
  end(): void;
}

/**
 * Opens a cancellation scope for one call: throws `'CANCELLED'` at once when the signal has
 * aborted or the token was cancelled already.
 */
export function openCancelScope(opts: { signal?: AbortSignal | undefined; cancel?: CancelToken | undefined } | undefined): CancelScope {
  const signal = opts?.signal;
  const given = opts?.cancel;
  if (signal?.aborted) throw cancelledBeforeStart(signal.reason);
  if (given?.cancelled) throw cancelledBeforeStart(undefined);
  const error = (status: number, err: Out): CairnError =>
    takeError(status, err, status === STATUS.CAIRN_ERR_CANCELLED && signal?.aborted ? signal.reason : undefined);
  if (!signal && !given) return { ptr: null, error, end: () => {} };
  if (!signal && given) {
    const [ptr, release] = given[acquire]();
    return { ptr, error, end: release };
  }
  // A signal: the call gets a token of its own, cancelled by the signal and by `given`.
  const own = new CancelToken();
  const onAbort = (): void => own.cancel();
  signal!.addEventListener('abort', onAbort, { once: true });
  const unlink = given ? given.link(own) : () => {};
  const [ptr, release] = own[acquire]();
  return {
    ptr,
    error,
    end: () => {
      signal!.removeEventListener('abort', onAbort);
      unlink();
      release();
      own.close();
    },
  };
}
