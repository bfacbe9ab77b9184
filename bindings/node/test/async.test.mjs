// Long operations run on koffi's worker threads: the event loop keeps running while they do,
// several run at once on one and on two workspaces, and progress reaches the main thread.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CairnError, CancelToken, Workspace } from 'cairn';
import { fixture, read, tempDir, writeMany, writeTree } from './helpers.mjs';

test('several operations at once on one workspace, and on two', async (t) => {
  const { dir, root, ws } = await fixture(t);
  writeMany(root, 300, 4096);
  const first = await ws.snapshot({ label: 'base' });
  const otherRoot = path.join(dir, 'other');
  fs.mkdirSync(otherRoot);
  writeTree(otherRoot, { 'b.txt': 'b' });
  const other = await Workspace.open(otherRoot);
  t.after(() => other.close());

  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  t.after(() => clearInterval(timer));
  const progressCalls = [0, 0, 0];
  const results = await Promise.all([
    ws.snapshot({ label: 'a1', useStatCache: false, onProgress: () => void progressCalls[0]++ }),
    ws.snapshot({ label: 'a2', useStatCache: false, onProgress: () => void progressCalls[1]++ }),
    other.snapshot({ label: 'b1', onProgress: () => void progressCalls[2]++ }),
    ws.verify(),
    ws.diff(first.id),
    ws.plan(first.id),
    ws.gc({ dryRun: true }),
    other.verify(),
    ws.copy(first.id, other),
  ]);
  clearInterval(timer);
  const [a1, a2, b1, verified, diff, plan, gcPlan, otherVerified, copied] = results;
  assert.equal(a1.stats.files, 302);
  assert.equal(a2.stats.files, 302);
  assert.equal(a1.root, a2.root, 'the same files make the same tree');
  assert.equal(b1.stats.files, 1);
  assert.equal(verified.ok, true);
  assert.deepEqual(diff, []);
  assert.equal(plan.actions.length, 0);
  assert.ok(gcPlan.snapshots >= 1);
  assert.equal(otherVerified.ok, true);
  assert.equal(copied.snapshot, first.id);
  assert.ok(progressCalls.every((n) => n >= 1), `progress calls ${progressCalls}`);
  assert.deepEqual(ws.list().map((s) => s.label).sort(), ['a1', 'a2', 'base']);
  assert.ok(other.list().some((s) => s.id === first.id));

  // Restores of both workspaces at once, with a failing one among them.
  writeTree(root, { README: 'changed\n' });
  writeTree(otherRoot, { 'b.txt': 'changed' });
  const settled = await Promise.allSettled([ws.restore('base'), other.restore('b1'), ws.restore('missing')]);
  assert.equal(settled[0].status, 'fulfilled');
  assert.equal(settled[1].status, 'fulfilled');
  assert.equal(settled[2].status, 'rejected');
  assert.equal(settled[2].reason.code, 'NOT_FOUND');
  assert.equal(read(root, 'README'), 'hello\n');
  assert.equal(read(otherRoot, 'b.txt'), 'b');
});

describe('a large tree (5,000 files)', () => {
  let big;
  const cleanups = [];
  before(async () => {
    // One tree for both tests: writing it is the slow part.
    big = await fixture({ after: (fn) => cleanups.unshift(fn) }, {});
    writeMany(big.root, 5000, 8192);
  });
  after(() => cleanups.forEach((fn) => fn()));

  test('an abort while a snapshot runs stops it on its worker thread', async (t) => {
  const { ws } = big;
  const aborter = new AbortController();
  const token = new CancelToken();
  t.after(() => token.close());
  let progress = 0;
  let seenFiles = 0;
  const running = ws.snapshot({
    useStatCache: false,
    signal: aborter.signal,
    onProgress: (p) => {
      progress++;
      seenFiles = p.files;
      aborter.abort(new Error('stop'));
    },
  });
  await assert.rejects(running, (e) => e instanceof CairnError && e.code === 'CANCELLED' && e.cause.message === 'stop');
  assert.ok(progress >= 1);
  assert.ok(seenFiles < 5000, 'the abort came while the walk was running');
  const before = ws.list().length;
  // One token stops several calls; a token given with a signal is honoured too.
  const calls = [ws.snapshot({ cancel: token, useStatCache: false }), ws.snapshot({ cancel: token, signal: new AbortController().signal, useStatCache: false })];
  token.cancel();
  for (const r of await Promise.allSettled(calls)) {
    assert.equal(r.status, 'rejected');
    assert.equal(r.reason.code, 'CANCELLED');
  }
  assert.equal(ws.list().length, before, 'cancelled snapshots record nothing');
});

  test('a timer keeps firing while a large snapshot runs', async () => {
  const { ws, root } = big;
  // A blocking call would let a 5 ms timer fire at most once, after it returned: the call
  // must take long enough for that to show. The 5,000 files once took only 38 ms (on tmpfs,
  // a quiet machine), so a faster machine gets more of them: the tree doubled each time a
  // snapshot takes under 40 ms (three times at most: 40,000 files).
  let files = 5000;
  for (let round = 0; ; round++) {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    let progress = 0;
    let last;
    const started = performance.now();
    let snap;
    try {
      snap = await ws.snapshot({ useStatCache: false, onProgress: (p) => { progress++; last = p; } });
    } finally {
      clearInterval(timer);
    }
    const took = performance.now() - started;
    assert.equal(snap.stats.files, files);
    if (took < 40 && round < 3) {
      writeMany(path.join(root, `more${round}`), files, 8192);
      files *= 2;
      continue;
    }
    assert.ok(took >= 40, `the snapshot of ${files} files took only ${took.toFixed(0)} ms`);
    assert.ok(ticks >= 3, `the timer fired ${ticks} times during a ${took.toFixed(0)} ms snapshot`);
    assert.ok(progress >= 1, 'progress reached the main thread');
    assert.ok(last.files > 0 && last.hashedBytes > 0);
    break;
  }
});
});
