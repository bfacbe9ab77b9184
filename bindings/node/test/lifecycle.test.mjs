// Handles: close() is idempotent, use after close throws ERR_USE_AFTER_CLOSE, closing while
// calls run frees the handle only after they return, and a FinalizationRegistry frees what
// nobody closed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CancelToken, UseAfterCloseError, Workspace, handleStats } from 'cairn';
import { fixture, writeMany } from './helpers.mjs';

const isClosedError = (e) => e instanceof UseAfterCloseError && e.code === 'ERR_USE_AFTER_CLOSE' && /closed/.test(e.message);

test('closing twice is fine, and every call after close throws', async (t) => {
  const { root, ws } = await fixture(t);
  const snap = await ws.snapshot();
  const other = await Workspace.open(root, { store: ws.store });
  assert.equal(ws.closed, false);
  ws.close();
  ws.close();
  ws[Symbol.dispose]();
  assert.equal(ws.closed, true);
  assert.throws(() => ws.info(), isClosedError);
  assert.throws(() => ws.list(), isClosedError);
  assert.throws(() => ws.show(snap.id), isClosedError);
  assert.throws(() => ws.hold('x'), isClosedError);
  for (const call of [
    () => ws.snapshot(),
    () => ws.diff(snap.id),
    () => ws.delete(snap.id),
    () => ws.prune({ count: 1 }),
    () => ws.gc(),
    () => ws.verify(),
    () => ws.copy(snap.id, other),
    () => other.copy(snap.id, ws),
    () => ws.plan(snap.id),
    () => ws.apply({}),
    () => ws.restore(snap.id),
    () => ws.recover(),
    () => ws.giveUp(),
  ]) {
    await assert.rejects(call(), isClosedError);
  }
  // The other handle on the same store is unaffected.
  assert.equal(other.list().length, 1);
  other.close();
  other.close();

  const token = new CancelToken();
  token.close();
  token.close();
  assert.throws(() => token.cancel(), isClosedError);
  await assert.rejects(Workspace.open(root).then((w) => { t.after(() => w.close()); return w.snapshot({ cancel: token }); }), isClosedError);
});

test('closing while calls run lets them finish, then frees the handle', async (t) => {
  const { root, ws } = await fixture(t);
  writeMany(root, 500, 4096);
  const running = [ws.snapshot({ useStatCache: false }), ws.verify()];
  ws.close();
  assert.throws(() => ws.list(), isClosedError);
  const [snap, verified] = await Promise.all(running);
  assert.equal(snap.stats.files, 502);
  assert.equal(verified.ok, true);
  await ws.whenIdle();

  const again = await Workspace.open(root, { store: ws.store });
  const pending = again.verify();
  await again[Symbol.asyncDispose](); // closes, then waits for the verify to return
  assert.equal(again.closed, true);
  assert.equal((await pending).ok, true);
});

test('the count of live handles goes back down when they are closed', async (t) => {
  const { root, ws } = await fixture(t);
  const before = handleStats().live.Workspace ?? 0;
  const a = await Workspace.open(root, { store: ws.store });
  const h = a.hold('x');
  const c = new CancelToken();
  assert.equal(handleStats().live.Workspace, before + 1);
  h.close();
  c.close();
  a.close();
  assert.equal(handleStats().live.Workspace, before);
});

test('a workspace nobody closed is freed by the FinalizationRegistry backstop', async (t) => {
  const { root, store } = await fixture(t);
  const here = path.dirname(fileURLToPath(import.meta.url));
  const script = `
    const { Workspace, CancelToken, Threads, handleStats } = require('cairn');
    function forget() {
      const ws = Workspace.openSync(${JSON.stringify(root)}, { store: ${JSON.stringify(store)} });
      ws.hold('forgotten');
      new CancelToken();
      Threads.openSync(null, { workspace: ws });
    }
    (async () => {
      for (let i = 0; i < 20; i++) forget();
      for (let i = 0; i < 20 && handleStats().finalized < 80; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 10));
      }
      console.log(JSON.stringify(handleStats()));
    })();`;
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', script], { cwd: path.join(here, '..'), encoding: 'utf8' });
  const stats = JSON.parse(out);
  assert.equal(stats.finalized, 80, out);
  assert.deepEqual(stats.live, { Workspace: 0, Hold: 0, CancelToken: 0, Threads: 0 });
});
