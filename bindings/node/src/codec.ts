/**
 * The JSON documents that cross the C ABI, turned into JS values and back.
 *
 * Coming in: keys go from `snake_case` to `camelCase`, and a path in the `{"hex": "..."}` form
 * becomes an escaped path string (see `paths.ts`). Going out: the reverse, so a value read
 * from the library (a plan, say) can be given back to it, even after `JSON.stringify` and
 * `JSON.parse`. The value of a `metadata` key is the caller's own data and is never touched.
 */
import { isHexPath, pathFromBuffer, pathToJson } from './paths.js';

const camel = (k: string): string => k.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
const snake = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Whether a key holds caller data that is passed through unchanged. */
const opaqueKey = (k: string): boolean => k === 'metadata';

function fromNativeValue(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(fromNativeValue);
  if (v === null || typeof v !== 'object') return v;
  if (isHexPath(v)) return pathFromBuffer(Buffer.from(v.hex, 'hex'));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    out[camel(k)] = opaqueKey(k) ? x : fromNativeValue(x);
  }
  return out;
}

function toNativeValue(v: unknown): unknown {
  if (typeof v === 'string') return pathToJson(v);
  if (Array.isArray(v)) return v.map(toNativeValue);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (x === undefined) continue;
    out[snake(k)] = opaqueKey(k) ? x : toNativeValue(x);
  }
  return out;
}

/** Parses a JSON document from the library into its JS form. */
export function fromNative<T>(json: Buffer): T {
  return fromNativeValue(JSON.parse(json.toString('utf8'))) as T;
}

/** The JSON document (as bytes) the library reads for a JS value; empty for `undefined`. */
export function toNative(value: unknown): Buffer {
  if (value === undefined) return Buffer.alloc(0);
  return Buffer.from(JSON.stringify(toNativeValue(value)), 'utf8');
}

/** The JSON document of an options object, minus the keys that stay on the JS side. */
export function nativeOptions(opts: object | undefined, ...jsOnly: string[]): Buffer {
  if (!opts) return Buffer.alloc(0);
  const skip = new Set(['signal', 'cancel', ...jsOnly]);
  return toNative(Object.fromEntries(Object.entries(opts).filter(([k]) => !skip.has(k))));
}
