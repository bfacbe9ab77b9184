/**
 * Calling the C functions that end in `(..., cairn_buf **out, cairn_error **err_out)`:
 * synchronously on the main thread, or through koffi's `.async` on a worker thread.
 */
import { takeError, type CairnError } from './errors.js';
import { copyBytes, load, STATUS, type FunctionName, type Out, type Pointer } from './ffi.js';

/** Copies a `cairn_buf`'s bytes and frees it. */
export function takeBuf(ptr: Pointer): Buffer {
  const lib = load();
  try {
    return copyBytes(lib.cairn_buf_bytes(ptr));
  } finally {
    lib.cairn_buf_free(ptr);
  }
}

type ErrorFor = (status: number, err: Out) => CairnError;
const defaultError: ErrorFor = (status, err) => takeError(status, err);

/** Calls `name(...args, &out, &err)` on this thread and returns the bytes of `out`. */
export function callSync(name: FunctionName, args: unknown[]): Buffer {
  const out: Out = [null];
  const err: Out = [null];
  const status = load()[name](...args, out, err) as number;
  if (status !== STATUS.CAIRN_OK) throw takeError(status, err);
  return takeBuf(out[0]);
}

/**
 * Calls `name(...args, &out, &err)` on a koffi worker thread. Resolves with the raw `out`
 * pointer (a buffer or a handle, depending on the function); `args` (and the Buffers in it)
 * stay referenced until the call returns.
 */
export function callAsyncRaw(name: FunctionName, args: unknown[], errorFor: ErrorFor = defaultError): Promise<Pointer> {
  return callAsyncWith(name, args, true, errorFor);
}

/** Calls `name(...args, &err)` (a function with no output but its status) on a worker thread. */
export async function callAsyncVoid(name: FunctionName, args: unknown[], errorFor: ErrorFor = defaultError): Promise<void> {
  await callAsyncWith(name, args, false, errorFor);
}

function callAsyncWith(name: FunctionName, args: unknown[], withOut: boolean, errorFor: ErrorFor): Promise<Pointer> {
  // The stack of the caller, for errors made later in the completion callback.
  const site: { stack?: string } = {};
  Error.captureStackTrace(site, callAsyncWith);
  return new Promise((resolve, reject) => {
    const out: Out = [null];
    const err: Out = [null];
    const keep = args;
    try {
      load()[name].async(...args, ...(withOut ? [out] : []), err, (e: unknown, status: number) => {
        void keep;
        if (e) reject(e);
        else if (status !== STATUS.CAIRN_OK) reject(withStack(errorFor(status, err), site.stack));
        else resolve(out[0]);
      });
    } catch (e) {
      reject(e);
    }
  });
}

function withStack(e: Error, stack: string | undefined): Error {
  if (stack) e.stack = `${e.name}: ${e.message}\n${stack.slice(stack.indexOf('\n') + 1)}`;
  return e;
}

/** {@link callAsyncRaw} for a function whose output is a `cairn_buf`: resolves with its bytes. */
export async function callAsync(name: FunctionName, args: unknown[], errorFor: ErrorFor = defaultError): Promise<Buffer> {
  return takeBuf(await callAsyncRaw(name, args, errorFor));
}
