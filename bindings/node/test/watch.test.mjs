// A watcher inside the process: ws.watch() and ws.unwatch(), and what each snapshot says it
// walked (`walk`). The watcher's events are read when a snapshot asks for them, so no test
// waits for it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { CairnError, Workspace } from 'cairn';
import { fixture, writeTree } from './helpers.mjs';

test('a watched workspace snapshots only the directories that changed', async (t) => {
  const { root, ws } = await fixture(t);
  const status = await ws.watch();
  assert.equal(status.root, fs.realpathSync(root));
  assert.ok(status.watches >= 2, `the root and src/ are watched: ${JSON.stringify(status)}`);
  assert.deepEqual(status.unwatched, []);
  assert.equal(status.gone, false);
  assert.equal(status.overflows, 0);
  assert.equal(typeof status.tableBytes, 'number');

  // The first snapshot with this watcher has no earlier one to count from: it walks it all.
  const first = await ws.snapshot({ label: 'first' });
  assert.equal(first.walk.walked, 'full');
  assert.equal(typeof first.walk.reason, 'string');

  writeTree(root, { 'src/main.c': 'int main(void) { return 42; }\n' });
  const second = await ws.snapshot({ label: 'second' });
  assert.equal(second.walk.walked, 'partial', JSON.stringify(second.walk));
  // src, listed whole or looked at by the name its event gave.
  assert.ok(second.walk.listed + second.walk.named >= 1, JSON.stringify(second.walk));
  const changes = await ws.diff(first.id, second.id);
  assert.deepEqual(changes.map((c) => [c.path, c.kind]), [['src/main.c', 'modified']]);
  assert.equal(changes[0].new.size, 'int main(void) { return 42; }\n'.length);

  const third = await ws.snapshot({ label: 'third' });
  assert.notEqual(third.walk.walked, 'full', JSON.stringify(third.walk));
  assert.equal(third.root, second.root);

  await ws.unwatch();
  await ws.unwatch(); // none runs: nothing to do
  // Without the watcher every snapshot walks it all, and finds what the watched ones found.
  const full = await ws.snapshot({ label: 'full' });
  assert.deepEqual([full.walk.walked, full.walk.reason], ['full', null]);
  assert.equal(full.root, third.root);

  writeTree(root, { 'src/main.c': 'int main(void) { return 7; }\n' });
  const after = await ws.snapshot({ label: 'after' });
  assert.deepEqual([after.walk.walked, after.walk.reason], ['full', null]);
  assert.deepEqual((await ws.diff(full.id, after.id)).map((c) => [c.path, c.kind]), [['src/main.c', 'modified']]);
});

test('unknown watch options are refused with INVALID_ARGUMENT', async (t) => {
  const { ws } = await fixture(t);
  await assert.rejects(ws.watch({ maxWatch: 1 }), (e) => e instanceof CairnError && e.code === 'INVALID_ARGUMENT' && /max_watch/.test(e.message));
  await assert.rejects(ws.watch({ maxWatches: -1 }), (e) => e instanceof CairnError && e.code === 'INVALID_ARGUMENT');
  // Nothing was started: snapshots walk as before.
  const snap = await ws.snapshot();
  assert.deepEqual([snap.walk.walked, snap.walk.reason], ['full', null]);
});

test('maxWatches leaves the directories past it unwatched, walked by every snapshot', async (t) => {
  const { root, ws } = await fixture(t, { 'top.txt': 't', 'a/b/c.txt': 'c' });
  const status = await ws.watch({ maxWatches: 1 });
  assert.equal(status.watches, 1); // the root
  assert.deepEqual(status.unwatched.map((u) => u.split(':')[0]), ['a']);
  const before = await ws.snapshot();
  writeTree(root, { 'a/b/c.txt': 'changed' });
  const snap = await ws.snapshot();
  assert.equal(snap.walk.walked, 'partial', JSON.stringify(snap.walk));
  assert.equal(typeof snap.walk.reason, 'string');
  assert.deepEqual((await ws.diff(before.id, snap.id)).map((c) => c.path), ['a/b/c.txt']);
});

test('watch checks its signal before it starts, and a closed workspace refuses both calls', async (t) => {
  const { root, store } = await fixture(t);
  const ws = await Workspace.open(root, { store });
  await assert.rejects(ws.watch({ signal: AbortSignal.abort() }), (e) => e.code === 'CANCELLED');
  await ws.watch();
  ws.close(); // stops the watcher with the handle
  await assert.rejects(ws.watch(), (e) => e.code === 'ERR_USE_AFTER_CLOSE');
  await assert.rejects(ws.unwatch(), (e) => e.code === 'ERR_USE_AFTER_CLOSE');
});
