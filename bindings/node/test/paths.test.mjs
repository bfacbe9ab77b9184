// Escaped paths: names that are not UTF-8 become strings with lone surrogates U+DC80..U+DCFF
// (Python's surrogateescape) and turn back into the same bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isEscapedPath, pathFromBuffer, pathToBuffer } from 'cairn';
import { CAFE, CAFE_BYTES } from './helpers.mjs';

test('caf\\xe9.txt reads as caf\\udce9.txt and turns back into its bytes', () => {
  assert.equal(pathFromBuffer(CAFE_BYTES), CAFE);
  assert.deepEqual(pathToBuffer(CAFE), CAFE_BYTES);
  assert.ok(isEscapedPath(CAFE));
  // JSON keeps the escape as \udce9, so a path survives JSON.stringify and JSON.parse.
  assert.equal(JSON.stringify(CAFE), '"caf\\udce9.txt"');
  assert.deepEqual(pathToBuffer(JSON.parse(JSON.stringify(CAFE))), CAFE_BYTES);
});

test('UTF-8 names are plain strings, never escaped', () => {
  for (const name of ['café.txt', 'src/main.c', '日本語/ファイル', 'emoji 😀.md', '']) {
    const bytes = Buffer.from(name, 'utf8');
    assert.equal(pathFromBuffer(bytes), name);
    assert.ok(!isEscapedPath(name));
    assert.deepEqual(pathToBuffer(name), bytes);
  }
});

test('every byte sequence round-trips', () => {
  for (let b = 0; b < 256; b++) {
    const bytes = Buffer.from([0x61, b, 0x62]);
    assert.deepEqual(pathToBuffer(pathFromBuffer(bytes)), bytes, `byte ${b}`);
  }
  // Encoded surrogates, overlong forms and truncated sequences are not UTF-8: escaped byte by byte.
  for (const bytes of [[0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80], [0xff, 0xfe]]) {
    const s = pathFromBuffer(Buffer.from(bytes));
    assert.equal(s.length, bytes.length);
    assert.deepEqual(pathToBuffer(s), Buffer.from(bytes));
  }
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
  for (let i = 0; i < 2000; i++) {
    const bytes = Buffer.from(Array.from({ length: 1 + (i % 13) }, rand));
    assert.deepEqual(pathToBuffer(pathFromBuffer(bytes)), bytes);
  }
});

test('a lone surrogate that is not an escape is refused', () => {
  assert.throws(() => pathToBuffer('a\ud800b'), TypeError);
  assert.throws(() => pathToBuffer('a\udc00'), TypeError);
});
