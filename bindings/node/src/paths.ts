/**
 * Paths as strings, with an escape for names that are not UTF-8.
 *
 * Cairn keeps file names as raw bytes. A name that is valid UTF-8 is an ordinary JS string.
 * Each byte of a name that is not part of valid UTF-8 becomes the lone surrogate
 * `U+DC80 + (byte - 0x80)`: the bytes `caf\xe9.txt` read as `'caf\udce9.txt'`. This is
 * Python's `surrogateescape` (PEP 383), so the Python binding spells the same name the same way.
 *
 * It round-trips and cannot be confused with a real name: decoding valid UTF-8 never yields a
 * lone surrogate, so a string holding one in `U+DC80..U+DCFF` is always an escaped byte.
 * `pathToBuffer` turns such a string back into the exact bytes, for `fs` calls (which accept a
 * Buffer as a path) and for anything else that wants the real name.
 */

const fatal = new TextDecoder('utf-8', { fatal: true });

/** Decodes raw name bytes into a path string, escaping bytes that are not UTF-8. */
export function pathFromBuffer(bytes: Uint8Array): string {
  try {
    return fatal.decode(bytes);
  } catch {
    return decodeEscaped(bytes);
  }
}

/** The length of the valid UTF-8 sequence at `i`, or 0 when the byte there starts none. */
function sequenceLength(b: Uint8Array, i: number): number {
  const c = b[i]!;
  const cont = (j: number, lo = 0x80, hi = 0xbf): boolean => i + j < b.length && b[i + j]! >= lo && b[i + j]! <= hi;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  // 0xED 0xA0..0xBF would encode a surrogate: not valid UTF-8, so escaped byte by byte.
  if (c === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c >= 0xe1 && c <= 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

function decodeEscaped(b: Uint8Array): string {
  let out = '';
  let i = 0;
  while (i < b.length) {
    const n = sequenceLength(b, i);
    if (n === 0) {
      out += String.fromCharCode(0xdc00 + b[i]!);
      i += 1;
    } else {
      out += fatal.decode(b.subarray(i, i + n));
      i += n;
    }
  }
  return out;
}

/** Whether a path string holds escaped bytes (so its name is not UTF-8). */
export function isEscapedPath(p: string): boolean {
  return /[\udc80-\udcff]/.test(p) && !p.isWellFormed();
}

/**
 * The exact bytes of a path string: UTF-8, with each escaped byte (`U+DC80..U+DCFF` alone)
 * turned back into itself. Throws a `TypeError` for a lone surrogate that is not an escape.
 */
export function pathToBuffer(p: string | Uint8Array): Buffer {
  if (typeof p !== 'string') return Buffer.from(p);
  if (p.isWellFormed()) return Buffer.from(p, 'utf8');
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < p.length; i++) {
    const u = p.charCodeAt(i);
    if (u >= 0xd800 && u <= 0xdbff && i + 1 < p.length) {
      const v = p.charCodeAt(i + 1);
      if (v >= 0xdc00 && v <= 0xdfff) {
        i++;
        continue;
      }
    }
    if (u >= 0xd800 && u <= 0xdfff) {
      if (u < 0xdc80 || u > 0xdcff) {
        throw new TypeError(
          `path ${JSON.stringify(p)} holds a lone surrogate U+${u.toString(16).toUpperCase()} that is not an escaped byte (U+DC80..U+DCFF)`,
        );
      }
      parts.push(Buffer.from(p.slice(start, i), 'utf8'), Buffer.of(u - 0xdc00));
      start = i + 1;
    }
  }
  parts.push(Buffer.from(p.slice(start), 'utf8'));
  return Buffer.concat(parts);
}

/** The `{"hex": "..."}` form the C ABI uses in JSON for a name that is not UTF-8. */
export interface HexPath {
  hex: string;
}

/** Whether a JSON value is the `{"hex": "..."}` form of a path. */
export function isHexPath(v: unknown): v is HexPath {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  const hex = (v as { hex?: unknown }).hex;
  return keys.length === 1 && typeof hex === 'string' && /^(?:[0-9a-f]{2})*$/i.test(hex);
}

/** The JSON form of a path string: itself when UTF-8, else `{"hex": "..."}`. */
export function pathToJson(p: string): string | HexPath {
  return p.isWellFormed() ? p : { hex: pathToBuffer(p).toString('hex') };
}
