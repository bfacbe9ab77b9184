// The thin layer follows include/cairn.h: every function of the header is declared with the
// same parameters, the status table and ABI version match, and a missing, foreign or
// mismatched library is reported clearly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ABI_VERSION, PROTOTYPES, STATUS, load } from 'cairn/ffi';
import { ERROR_CODES, STATUS_BY_CODE, abiVersion, version } from 'cairn';
import { tempDir } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const header = fs.readFileSync(path.join(here, '..', '..', '..', 'include', 'cairn.h'), 'utf8');

/** `name -> normalised prototype` of every function the header declares. */
function headerFunctions() {
  const noComments = header.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const out = new Map();
  const re = /^([A-Za-z_][\w\s*]*?\b(cairn_\w+)\s*\(([^)]*)\));/gm;
  for (const m of noComments.matchAll(re)) {
    if (m[1].startsWith('typedef')) continue;
    out.set(m[2], normalise(m[1]));
  }
  return out;
}

/** Drops what differs by design (`struct`, `_Out_`, koffi's `cb *`) and spacing. */
function normalise(proto) {
  return proto
    .replace(/\bstruct\s+/g, '')
    .replace(/\b_Out_\s+/g, '')
    .replace(/cairn_progress_cb\s*\*/g, 'cairn_progress_cb ')
    .replace(/\s*\*\s*/g, ' *')
    .replace(/\s+/g, ' ')
    .replace(/\s*([(),])\s*/g, '$1')
    .trim();
}

test('every cairn_* function of the header is declared, with the same parameters', () => {
  const fns = headerFunctions();
  assert.ok(fns.size >= 32, `found only ${fns.size} functions in cairn.h`);
  for (const [name, proto] of fns) {
    assert.ok(name in PROTOTYPES, `${name} is in include/cairn.h but not declared in src/ffi.ts`);
    assert.equal(normalise(PROTOTYPES[name]), proto, `${name} differs from the header`);
  }
  for (const name of Object.keys(PROTOTYPES)) {
    assert.ok(fns.has(name), `${name} is declared but not in include/cairn.h`);
  }
  const lib = load();
  for (const name of fns.keys()) assert.equal(typeof lib[name], 'function', name);
});

test('the status table and ABI version match the header and the library', () => {
  const abi = Number(header.match(/#define CAIRN_ABI_VERSION (\d+)/)[1]);
  assert.equal(ABI_VERSION, abi);
  assert.equal(abiVersion(), abi);
  assert.equal(version(), header.match(/#define CAIRN_VERSION_STRING "([^"]+)"/)[1]);
  const enumBody = header.match(/enum cairn_status[\s\S]*?\{([\s\S]*?)\};/)[1];
  const inHeader = Object.fromEntries([...enumBody.matchAll(/(CAIRN_\w+) = (\d+)/g)].map((m) => [m[1], Number(m[2])]));
  assert.deepEqual(STATUS, inHeader);
  const lib = load();
  for (const code of ERROR_CODES) {
    assert.equal(lib.cairn_status_name(STATUS_BY_CODE[code]), code);
  }
  assert.equal(lib.cairn_status_name(STATUS.CAIRN_OK), 'OK');
});

/** Runs a script in a child process with CAIRN_LIB set; returns its CairnLoadError as JSON. */
function loadErrorWith(lib) {
  const script =
    "const c = require('cairn'); try { c.version(); console.log(JSON.stringify({ ok: true })); } " +
    'catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message, libraryPath: e.libraryPath })); }';
  const out = execFileSync(process.execPath, ['-e', script], {
    cwd: path.join(here, '..'),
    env: { ...process.env, CAIRN_LIB: lib },
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

test('a missing library is reported with what to do', () => {
  const e = loadErrorWith('/nonexistent/libcairn.so');
  assert.equal(e.name, 'CairnLoadError');
  assert.equal(e.code, 'ERR_CAIRN_LIBRARY_MISSING');
  assert.equal(e.libraryPath, '/nonexistent/libcairn.so');
  assert.match(e.message, /not found at \/nonexistent\/libcairn\.so/);
  assert.match(e.message, /cargo build --release -p cairn-ffi/);
  assert.match(e.message, /CAIRN_LIB/);
});

test('a shared library that is not libcairn is reported as such', (t) => {
  const dir = tempDir(t);
  const notLib = path.join(dir, 'libnot.so');
  fs.writeFileSync(notLib, 'not an ELF file');
  let e = loadErrorWith(notLib);
  assert.equal(e.code, 'ERR_CAIRN_LIBRARY_INVALID');
  assert.match(e.message, /cannot load/);
  const libc = ['/lib/x86_64-linux-gnu/libc.so.6', '/lib/aarch64-linux-gnu/libc.so.6', '/lib64/libc.so.6'].find((p) => fs.existsSync(p));
  if (libc) {
    e = loadErrorWith(libc);
    assert.equal(e.code, 'ERR_CAIRN_LIBRARY_INVALID');
    assert.match(e.message, /is not libcairn/);
  }
});

test('a library of another ABI version is refused, naming both versions', (t) => {
  const cc = spawnSync('cc', ['--version']);
  if (cc.status !== 0) return t.skip('no C compiler to build a stand-in library');
  const dir = tempDir(t);
  fs.writeFileSync(path.join(dir, 'abi.c'), 'unsigned int cairn_abi_version(void) { return 999; }\n');
  const so = path.join(dir, 'libcairn.so');
  execFileSync('cc', ['-shared', '-fPIC', '-o', so, path.join(dir, 'abi.c')]);
  const e = loadErrorWith(so);
  assert.equal(e.code, 'ERR_CAIRN_ABI_MISMATCH');
  assert.match(e.message, /ABI version 999/);
  assert.match(e.message, new RegExp(`ABI version ${ABI_VERSION}\\b`));
});

test('asynchronous calls run on the 2 MiB stack Rust code expects, not the 128 KiB of Koffi', async () => {
  // Koffi's default killed the process with SIGSEGV when a snapshot compiled its exclude globs
  // in an unoptimised libcairn.
  load();
  const koffi = (await import('koffi')).default;
  assert.ok(koffi.config().async_stack_size >= 2 * 1024 * 1024, JSON.stringify(koffi.config()));
});
