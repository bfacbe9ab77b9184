// Every error code the binding can provoke comes back as a CairnError with the library's
// status name as `code`, its number as `status`, a message, and the path when there is one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CairnError, CancelToken, ERROR_CODES, STATUS_BY_CODE, Workspace, statusDescription } from 'cairn';
import { load } from 'cairn/ffi';
import { fixture, tempDir, writeMany, writeTree } from './helpers.mjs';

/** Asserts `promiseOrFn` fails with a CairnError of `code`; returns the error. */
async function expectCode(code, promiseOrFn) {
  let error;
  try {
    await (typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn);
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof CairnError, `expected a CairnError ${code}, got ${error}`);
  assert.ok(error instanceof Error);
  assert.equal(error.name, 'CairnError');
  assert.equal(error.code, code, error.message);
  assert.equal(error.status, STATUS_BY_CODE[code]);
  assert.ok(error.message.length > 0);
  assert.ok(CairnError.is(error, code));
  return error;
}

const provoked = new Set();
const seen = async (code, p) => {
  const e = await expectCode(code, p);
  provoked.add(code);
  return e;
};

test('INVALID_ARGUMENT: unknown options, a plan that is not a plan, a bad retention', async (t) => {
  const { ws } = await fixture(t);
  const e = await seen('INVALID_ARGUMENT', ws.snapshot({ labl: 1 }));
  assert.match(e.message, /labl/);
  await seen('INVALID_ARGUMENT', ws.apply({ not: 'a plan' }));
  await seen('INVALID_ARGUMENT', ws.prune({ counts: 1 }));
  const snap = await ws.snapshot();
  await seen('INVALID_ARGUMENT', ws.restore(snap.id, { onDrift: 'sideways' }));
  await seen('INVALID_ARGUMENT', () => Workspace.openSync(''));
});

test('NOT_FOUND: an unknown snapshot, a missing root (with its path)', async (t) => {
  const { dir, ws } = await fixture(t);
  await seen('NOT_FOUND', () => ws.show('ffffffff'));
  await seen('NOT_FOUND', ws.restore('no-such-label'));
  await seen('NOT_FOUND', ws.diff('no-such-label'));
  await seen('NOT_FOUND', ws.delete('ffffffff'));
  const missing = path.join(dir, 'does-not-exist');
  const e = await seen('NOT_FOUND', Workspace.open(missing));
  assert.equal(e.path, missing);
  assert.deepEqual(e.pathBytes, Buffer.from(missing));
  await seen('NOT_FOUND', () => Workspace.openSync(missing));
});

test('BUSY: a restore under a hold', async (t) => {
  const { root, ws } = await fixture(t);
  const snap = await ws.snapshot();
  writeTree(root, { README: 'changed\n' });
  const hold = ws.hold('npm test');
  t.after(() => hold.close());
  const e = await seen('BUSY', ws.restore(snap.id));
  assert.match(e.message, /npm test/);
});

test('DENIED: a restore that would overwrite a file no snapshot can keep', async (t) => {
  const { root, ws } = await fixture(t, { 'notes.log': 'from the snapshot' });
  const snap = await ws.snapshot();
  writeTree(root, { '.gitignore': '*.log\n', 'notes.log': 'precious, ignored now' });
  const e = await seen('DENIED', ws.restore(snap.id));
  assert.match(e.message, /notes\.log/);
  assert.equal(e.path, path.join(fs.realpathSync(root), 'notes.log'));
  await seen('DENIED', ws.plan(snap.id));
  assert.equal(fs.readFileSync(path.join(root, 'notes.log'), 'utf8'), 'precious, ignored now');
});

test('CONFLICT: files edited since the reference, with onDrift refuse', async (t) => {
  const { root, ws } = await fixture(t);
  const first = await ws.snapshot();
  writeTree(root, { README: 'second\n', 'src/main.c': 'second\n' });
  const second = await ws.snapshot();
  writeTree(root, { README: 'edited by someone else\n' });
  const e = await seen('CONFLICT', ws.restore(first.id, { reference: second.id, onDrift: 'refuse' }));
  assert.equal(e.path, path.join(fs.realpathSync(root), 'README'));
  const skipped = await ws.restore(first.id, { reference: second.id, onDrift: 'skip' });
  assert.deepEqual(skipped.drifted, ['README']);
});

test('IO: a store path under a regular file', async (t) => {
  const { dir, root } = await fixture(t);
  fs.writeFileSync(path.join(dir, 'file'), 'x');
  const e = await seen('IO', Workspace.open(root, { store: path.join(dir, 'file', 'store') }));
  assert.equal(e.path, path.join(dir, 'file', 'store'));
});

test('CORRUPT: a manifest whose bytes do not hash to its name', async (t) => {
  const { store, ws } = await fixture(t);
  const snap = await ws.snapshot();
  const manifest = path.join(store, 'snapshots', snap.id);
  const bytes = fs.readFileSync(manifest);
  bytes[bytes.length - 1] ^= 0xff;
  fs.writeFileSync(manifest, bytes);
  const e = await seen('CORRUPT', () => ws.show(snap.id));
  assert.equal(e.path, manifest);
});

test('UNSUPPORTED: a large object of a format version this library does not know', async (t) => {
  const { root, store, ws } = await fixture(t, { 'big.bin': Buffer.alloc(1100 * 1024, 7) });
  const snap = await ws.snapshot();
  const large = path.join(store, 'objects', 'large');
  const [name] = fs.readdirSync(large);
  const obj = path.join(large, name);
  fs.chmodSync(obj, 0o600);
  const bytes = fs.readFileSync(obj);
  bytes.writeUInt32LE(99, 8);
  fs.writeFileSync(obj, bytes);
  fs.unlinkSync(path.join(root, 'big.bin'));
  const e = await seen('UNSUPPORTED', ws.restore(snap.id));
  assert.equal(e.path, obj);
});

test('CANCELLED: a cancelled token, an aborted signal, before and while running', async (t) => {
  const { ws } = await fixture(t);
  const token = new CancelToken();
  t.after(() => token.close());
  token.cancel();
  assert.ok(token.cancelled);
  await seen('CANCELLED', ws.snapshot({ cancel: token }));
  await seen('CANCELLED', ws.gc({ cancel: token }));
  const reason = new Error('the user pressed stop');
  const e = await seen('CANCELLED', ws.restore('x', { signal: AbortSignal.abort(reason) }));
  assert.equal(e.cause, reason);
  // Cancelled natively: the call is on its worker thread when the token is cancelled, and the
  // library stops before any change. The restore has 3,000 new files to take into its safety
  // snapshot first (a few hundred milliseconds), so the cancel, issued within a millisecond,
  // always lands before the apply starts; on the bare fixture the whole restore took 15 ms and
  // a busy machine could let it finish first.
  const snap = await ws.snapshot();
  writeTree(ws.root, { README: 'changed\n' });
  writeMany(ws.root, 3000, 16 * 1024);
  const running = new CancelToken();
  t.after(() => running.close());
  const restoring = ws.restore(snap.id, { cancel: running });
  running.cancel();
  await seen('CANCELLED', restoring);
  assert.equal(fs.readFileSync(path.join(ws.root, 'README'), 'utf8'), 'changed\n');
  assert.ok(fs.existsSync(path.join(ws.root, 'many', 'd0', 'f0.bin')), 'the new files are still there');
  const aborter = new AbortController();
  const again = ws.restore(snap.id, { signal: aborter.signal });
  aborter.abort(reason);
  assert.equal((await seen('CANCELLED', again)).cause, reason);
  assert.equal(fs.readFileSync(path.join(ws.root, 'README'), 'utf8'), 'changed\n');
});

test('ABORTED_BY_CALLBACK: a progress listener that returns false', async (t) => {
  const { ws } = await fixture(t);
  let calls = 0;
  await seen('ABORTED_BY_CALLBACK', ws.snapshot({ onProgress: () => (calls++, false) }));
  assert.ok(calls >= 1);
  assert.deepEqual(ws.list(), [], 'nothing was recorded');
  // A listener that throws stops the snapshot too, and its own error comes back.
  const boom = new Error('listener failed');
  await assert.rejects(ws.snapshot({ onProgress: () => { throw boom; } }), (e) => e === boom);
  assert.deepEqual(ws.list(), []);
});

test('PANIC and NULL_ARGUMENT through the thin layer map through the same table', async () => {
  const { takeError } = await import('../dist/errors.js');
  const lib = load();
  const err = [null];
  process.env.RUST_BACKTRACE = '0'; // the panic message is printed; its backtrace is noise here
  let status = lib.cairn_debug_panic(err);
  let e = takeError(status, err);
  assert.equal(e.code, 'PANIC');
  assert.match(e.message, /bug in Cairn/);
  provoked.add('PANIC');
  const out = [null];
  status = lib.cairn_workspace_list(null, out, err);
  e = takeError(status, err);
  assert.equal(e.code, 'NULL_ARGUMENT');
  assert.equal(out[0], null, 'outputs are written only on success');
  provoked.add('NULL_ARGUMENT');
});

test('every code is in the table, and each is provoked here or in threads.test.mjs', () => {
  assert.deepEqual(ERROR_CODES, [
    'INVALID_ARGUMENT', 'NOT_FOUND', 'VALIDATION', 'BUSY', 'WORKSPACE_BUSY', 'THREAD_BUSY', 'DENIED', 'IO',
    'CORRUPT', 'CONFLICT', 'CANCELLED', 'RUN_INTERRUPTED', 'UNSUPPORTED', 'NULL_ARGUMENT', 'PANIC',
    'ABORTED_BY_CALLBACK',
  ]);
  for (const code of ERROR_CODES) assert.ok(statusDescription(STATUS_BY_CODE[code]).length > 0);
  // Raised by the thread functions: provoked in threads.test.mjs.
  const byThreads = ['VALIDATION', 'WORKSPACE_BUSY', 'THREAD_BUSY', 'RUN_INTERRUPTED'];
  const missing = ERROR_CODES.filter((c) => !provoked.has(c) && !byThreads.includes(c));
  assert.deepEqual(missing, [], 'every code the workspace API can raise was provoked above');
});
