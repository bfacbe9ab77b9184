// The whole flow through the binding: open, snapshot, list, show, diff, plan, apply, restore,
// undo, verify, copy, gc, prune, delete, recover, holds; and a non-UTF-8 name end to end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CairnError, Workspace, pathToBuffer } from 'cairn';
import { CAFE, CAFE_BYTES, fixture, read, writeTree } from './helpers.mjs';

test('the whole flow: snapshot, change, diff, plan, apply, undo, upkeep', async (t) => {
  const { dir, root, store, ws } = await fixture(t);
  assert.equal(ws.root, fs.realpathSync(root));
  assert.equal(ws.store, store);
  assert.match(ws.id, /^ws-[0-9a-f]{16}$/);
  assert.deepEqual(ws.info(), { id: ws.id, root: ws.root, store, storeHome: 'given', recovered: [], remote: null });

  const first = await ws.snapshot({ label: 'first', metadata: { turn: 1, tool_call: 'edit' } });
  assert.match(first.id, /^[0-9a-f]{64}$/);
  assert.equal(first.label, 'first');
  assert.deepEqual(first.metadata, { turn: 1, tool_call: 'edit' }); // caller data: keys untouched
  assert.equal(first.stats.files, 2);
  assert.equal(typeof first.stats.storedBytes, 'number');
  assert.deepEqual(first.kept, []);
  assert.equal(first.pruneError, null);

  writeTree(root, { 'src/main.c': 'int main(void) { return 1; }\n', 'new.txt': 'made later\n' });
  const live = await ws.diff('first');
  assert.deepEqual(
    live.map((c) => [c.path, c.kind]),
    [['new.txt', 'added'], ['src/main.c', 'modified']],
  );
  assert.equal(live[1].old.kind, 'file');

  const second = await ws.snapshot({ label: 'second' });
  assert.deepEqual((await ws.diff('first', 'second')).map((c) => c.path), ['new.txt', 'src/main.c']);
  assert.deepEqual(ws.list().map((s) => s.label), ['first', 'second']);
  assert.equal(ws.show('second').id, second.id);
  assert.equal(ws.show(first.id.slice(0, 8)).id, first.id);

  const plan = await ws.plan('first');
  assert.equal(plan.snapshotId, first.id);
  assert.deepEqual(plan.deleted, ['new.txt']);
  assert.deepEqual(plan.restored, ['src/main.c']);
  assert.deepEqual(plan.actions.map((a) => a.op), ['remove_file', 'write_file']);
  assert.equal(plan.busy, false);
  assert.match(read(root, 'src/main.c'), /return 1/, 'a plan changes nothing');

  const applied = await ws.apply(plan);
  assert.equal(applied.dryRun, false);
  assert.equal(applied.asPlanned, true);
  assert.deepEqual(applied.deleted, ['new.txt']);
  assert.match(applied.safetySnapshotId, /^[0-9a-f]{64}$/);
  assert.match(read(root, 'src/main.c'), /return 0/);
  assert.ok(!fs.existsSync(path.join(root, 'new.txt')));

  const dry = await ws.restore(applied.safetySnapshotId, { dryRun: true });
  assert.equal(dry.dryRun, true);
  assert.equal(dry.operations, 0);
  assert.ok(!fs.existsSync(path.join(root, 'new.txt')));
  const undo = await ws.restore(applied.safetySnapshotId);
  assert.deepEqual(undo.restored.sort(), ['new.txt', 'src/main.c']);
  assert.equal(read(root, 'new.txt'), 'made later\n');

  const verified = await ws.verify();
  assert.equal(verified.ok, true);
  assert.ok(verified.copiesChecked > 0);
  assert.equal(verified.snapshots.length, ws.list().length);

  const otherRoot = path.join(dir, 'other');
  fs.mkdirSync(otherRoot);
  const other = await Workspace.open(otherRoot);
  t.after(() => other.close());
  const copied = await ws.copy(first.id, other);
  assert.equal(copied.snapshot, first.id);
  assert.ok(copied.objectsCopied > 0);
  assert.equal((await ws.copy(first.id, other)).alreadyPresent, true);
  await other.restore(first.id);
  assert.match(read(otherRoot, 'src/main.c'), /return 0/);

  const gcPlan = await ws.gc({ dryRun: true });
  assert.equal(gcPlan.snapshots, ws.list().length);
  assert.ok(Array.isArray(gcPlan.deletePacks));
  const gc = await ws.gc({ graceMs: 0 });
  assert.equal(typeof gc.deferred, 'boolean');
  assert.equal(typeof gc.plan.reachableObjects, 'number');
  const pruned = await ws.prune({ count: 100 });
  assert.deepEqual(pruned.deleted, []);
  assert.equal(pruned.kept, ws.list().length);
  const before = ws.list().length;
  const deleted = await ws.delete('second');
  assert.deepEqual(deleted.deleted, [second.id]);
  assert.equal(ws.list().length, before - 1);
  assert.deepEqual(await ws.recover(), []);
  assert.deepEqual(await ws.giveUp(), []);
});

test('a hold makes a restore BUSY and a plan say busy, until released', async (t) => {
  const { root, ws } = await fixture(t);
  const snap = await ws.snapshot();
  writeTree(root, { README: 'changed\n' });
  const hold = ws.hold('make test');
  assert.equal(hold.what, 'make test');
  assert.equal((await ws.plan(snap.id)).busy, true);
  await assert.rejects(ws.restore(snap.id), (e) => e instanceof CairnError && e.code === 'BUSY');
  hold.release();
  hold.release();
  await ws.restore(snap.id);
  assert.equal(read(root, 'README'), 'hello\n');
  // With a pid, the hold also lasts until that process exits.
  const child = ws.hold('background server', { pid: process.pid });
  child.release();
  await assert.rejects(ws.restore(snap.id), (e) => e.code === 'BUSY' && /background server/.test(e.message));
  {
    // `using` releases at the end of the scope (TypeScript, or a runtime with the syntax).
    const h = ws.hold('scoped');
    h[Symbol.dispose]();
    assert.ok(h.closed);
  }
});

test('a file named with the bytes caf\\xe9.txt round-trips through diff, plan, apply and restore', async (t) => {
  const { root, ws } = await fixture(t, { 'plain.txt': 'plain\n' });
  const cafePath = Buffer.concat([Buffer.from(root + '/'), CAFE_BYTES]);
  fs.writeFileSync(cafePath, 'latin-1 name\n');
  const snap = await ws.snapshot({ label: 'with-cafe' });
  assert.equal(snap.stats.files, 2);

  fs.unlinkSync(cafePath);
  const changes = await ws.diff(snap.id);
  assert.equal(changes.length, 1);
  assert.equal(changes[0].path, CAFE);
  assert.equal(changes[0].kind, 'deleted');
  assert.deepEqual(pathToBuffer(changes[0].path), CAFE_BYTES);
  // The escaped string is usable with fs through its bytes.
  assert.deepEqual(pathToBuffer(path.join(root, changes[0].path)), cafePath);

  // A plan that went through JSON (say, stored by the agent) still applies.
  const plan = JSON.parse(JSON.stringify(await ws.plan(snap.id)));
  assert.deepEqual(plan.restored, [CAFE]);
  assert.equal(plan.actions[0].path, CAFE);
  const report = await ws.apply(plan);
  assert.deepEqual(report.restored, [CAFE]);
  assert.equal(fs.readFileSync(cafePath, 'utf8'), 'latin-1 name\n');

  fs.writeFileSync(cafePath, 'edited\n');
  const restored = await ws.restore('with-cafe');
  assert.deepEqual(restored.restored, [CAFE]);
  assert.equal(fs.readFileSync(cafePath, 'utf8'), 'latin-1 name\n');
  // A directory listing with Buffer names finds exactly those bytes.
  assert.ok(fs.readdirSync(root, { encoding: 'buffer' }).some((n) => n.equals(CAFE_BYTES)));
});

test('a workspace root named with non-UTF-8 bytes opens from its escaped string or its bytes', async (t) => {
  const { dir } = await fixture(t);
  const rootBytes = Buffer.concat([Buffer.from(dir + '/'), CAFE_BYTES]);
  fs.mkdirSync(rootBytes);
  fs.writeFileSync(Buffer.concat([rootBytes, Buffer.from('/a.txt')]), 'a');
  const store = path.join(dir, 'store2');
  const byString = await Workspace.open(path.join(dir, CAFE), { store });
  t.after(() => byString.close());
  assert.equal(byString.root, path.join(fs.realpathSync(dir), CAFE));
  const byBytes = Workspace.openSync(rootBytes, { store });
  t.after(() => byBytes.close());
  assert.equal(byBytes.id, byString.id);
  assert.equal((await byBytes.snapshot()).stats.files, 1);
});

test('options take camelCase keys and refuse unknown ones', async (t) => {
  const { root, ws } = await fixture(t, { 'keep.txt': 'k', 'big.bin': Buffer.alloc(2048), 'logs/x.log': 'l' });
  const snap = await ws.snapshot({ maxFileBytes: 1024, excludes: ['logs'], useStatCache: false, protect: true });
  assert.equal(snap.protected, true);
  assert.deepEqual(snap.skipped, [{ path: 'big.bin', reason: 'too-large', isDir: false }]);
  assert.deepEqual(snap.kept, [{ path: 'logs', reason: 'glob', isDir: true }]);
  assert.equal(snap.maxFileBytes, 1024);
  await assert.rejects(ws.snapshot({ lable: 'typo' }), (e) => e.code === 'INVALID_ARGUMENT' && /lable/.test(e.message));
  assert.ok(fs.existsSync(path.join(root, 'keep.txt')));
});
