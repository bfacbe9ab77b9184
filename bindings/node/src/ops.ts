/**
 * One asynchronous operation on one or more handles: marks each busy while the call runs on
 * its worker thread (so none is freed under it), bridges cancellation, and returns the
 * output buffer's bytes.
 */
import { callAsync, callAsyncRaw, callAsyncVoid } from './call.js';
import { openCancelScope, type CancelScope } from './cancel.js';
import type { CairnError } from './errors.js';
import type { FunctionName, Out, Pointer } from './ffi.js';
import { acquire, type NativeHandle } from './handle.js';
import type { CallOptions } from './types.js';

type Args = (ptrs: Pointer[], scope: CancelScope) => unknown[];

async function withHandles<T>(
  handles: ReadonlyArray<NativeHandle | null | undefined>,
  opts: CallOptions | undefined,
  body: (ptrs: Pointer[], scope: CancelScope) => Promise<T>,
): Promise<T> {
  const scope = openCancelScope(opts);
  const releases: Array<() => void> = [];
  try {
    const ptrs: Pointer[] = handles.map((h) => {
      if (!h) return null;
      const [ptr, release] = h[acquire]();
      releases.push(release);
      return ptr;
    });
    return await body(ptrs, scope);
  } finally {
    for (const r of releases) r();
    scope.end();
  }
}

type ErrorFor = (status: number, err: Out) => CairnError;
type Caller<T> = (name: FunctionName, args: unknown[], errorFor: ErrorFor) => Promise<T>;
type Runner<T> = (
  handles: ReadonlyArray<NativeHandle | null | undefined>,
  name: FunctionName,
  args: Args,
  opts?: CallOptions,
) => Promise<T>;

/** Runs a call on a worker thread with `handles` (null for an absent optional one) marked busy. */
const runWith =
  <T>(call: Caller<T>): Runner<T> =>
  (handles, name, args, opts) =>
    withHandles(handles, opts, (ptrs, scope) => call(name, args(ptrs, scope), (s, e) => scope.error(s, e)));

/** For a function whose output is a `cairn_buf`: resolves with its bytes. */
export const runAsync: Runner<Buffer> = runWith(callAsync);
/** For a function whose output is a handle: resolves with its pointer. */
export const runAsyncRaw: Runner<Pointer> = runWith(callAsyncRaw);
/** For a function whose only output is its status. */
export const runAsyncVoid: Runner<void> = runWith(callAsyncVoid);

/** Throws `'CANCELLED'` when an operation the C ABI cannot stop midway is cancelled before it starts. */
export function checkNotCancelled(opts: CallOptions | undefined): void {
  openCancelScope(opts).end();
}
