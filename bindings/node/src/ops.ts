/**
 * One asynchronous operation on one or more handles: marks each busy while the call runs on
 * its worker thread (so none is freed under it), bridges cancellation, and returns the
 * output buffer's bytes.
 */
import { callAsync, callAsyncRaw } from './call.js';
import { openCancelScope, type CancelScope } from './cancel.js';
import type { FunctionName, Pointer } from './ffi.js';
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

/**
 * Runs `name` on a worker thread with `handles` (null for an absent optional one) marked busy,
 * and resolves with the bytes of its output buffer. `opts` carries a signal and/or token.
 */
export function runAsync(
  handles: ReadonlyArray<NativeHandle | null | undefined>,
  name: FunctionName,
  args: Args,
  opts?: CallOptions,
): Promise<Buffer> {
  return withHandles(handles, opts, (ptrs, scope) => callAsync(name, args(ptrs, scope), (s, e) => scope.error(s, e)));
}

/** {@link runAsync} for a function whose output is a handle: resolves with its pointer. */
export function runAsyncRaw(
  handles: ReadonlyArray<NativeHandle | null | undefined>,
  name: FunctionName,
  args: Args,
  opts?: CallOptions,
): Promise<Pointer> {
  return withHandles(handles, opts, (ptrs, scope) => callAsyncRaw(name, args(ptrs, scope), (s, e) => scope.error(s, e)));
}

/** Throws `'CANCELLED'` when an operation the C ABI cannot stop midway is cancelled before it starts. */
export function checkNotCancelled(opts: CallOptions | undefined): void {
  openCancelScope(opts).end();
}
