// A remote store through the binding: a snapshot from one workspace into a file:// remote
// with its own cache, restored byte for byte into a second workspace with another cache; the
// remote's collector, the cache trim, and the errors of a bad remote.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { CairnError, Workspace } from 'cairn';
import { tempDir, writeMany, writeTree } from './helpers.mjs';

/** Every file and directory under `root`: relative path -> bytes (null for a directory). */
function tree(root) {
  const out = new Map();
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      const rel = path.relative(root, p);
      if (e.isDirectory()) {
        out.set(rel, null);
        walk(p);
      } else {
        out.set(rel, fs.readFileSync(p));
      }
    }
  };
  walk(root);
  return out;
}

function assertSameTree(want, got) {
  const a = tree(want);
  const b = tree(got);
  assert.deepEqual([...b.keys()].sort(), [...a.keys()].sort());
  for (const [rel, bytes] of a) {
    if (bytes === null) assert.equal(b.get(rel), null, rel);
    else assert.ok(bytes.equals(b.get(rel)), `${rel} differs`);
  }
}

test('a snapshot into a file:// remote is restored byte for byte into another workspace with its own cache', async (t) => {
  const dir = tempDir(t);
  const remoteDir = path.join(dir, 'remote');
  fs.mkdirSync(remoteDir);
  const url = `file://${remoteDir}`;
  const rootA = path.join(dir, 'a');
  fs.mkdirSync(rootA);
  writeMany(rootA, 150, 700);
  writeTree(rootA, { 'bin/blob': Buffer.from([0, 1, 2, 255, 254, 10]), 'README.md': '# machine A\n' });

  const a = await Workspace.open(rootA, { store: path.join(dir, 'cache-a'), remote: url });
  t.after(() => a.close());
  assert.equal(a.info().remote, url);
  const snap = await a.snapshot({ label: 'from-a' });

  const rootB = path.join(dir, 'b');
  fs.mkdirSync(rootB);
  const b = await Workspace.open(rootB, { store: path.join(dir, 'cache-b'), remote: url });
  t.after(() => b.close());
  assert.deepEqual(b.list().map((s) => s.id), [snap.id]);
  await b.restore('from-a');
  assertSameTree(rootA, rootB);

  // An empty cache still restores: what the remote holds is fetched again.
  const trim = await b.trimCache(0);
  assert.ok(trim.removedFiles > 0, JSON.stringify(trim));
  assert.equal(trim.cachedBytes, 0);
  fs.rmSync(rootB, { recursive: true });
  fs.mkdirSync(rootB);
  await b.restore(snap.id);
  assertSameTree(rootA, rootB);

  // gc runs the remote's collector: every object is reachable, nothing goes.
  const gc = await b.gc();
  assert.ok(gc.remote, JSON.stringify(gc));
  assert.ok(gc.remote.snapshots >= 1, JSON.stringify(gc.remote));
  assert.equal(gc.remote.packsDeleted, 0);
});

test('trimCache of a workspace without a remote is UNSUPPORTED', async (t) => {
  const dir = tempDir(t);
  const ws = await Workspace.open(dir, { store: path.join(tempDir(t), 'store') });
  t.after(() => ws.close());
  await assert.rejects(ws.trimCache(0), (e) => e instanceof CairnError && e.code === 'UNSUPPORTED');
});

test('an unreachable endpoint fails with IO within seconds, naming the URL and not the secret', async (t) => {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p)); // nothing listens there now
    });
  });
  const secret = 's3cr3t-never-shown-0123456789';
  const root = tempDir(t);
  const started = Date.now();
  const error = await Workspace.open(root, {
    store: path.join(tempDir(t), 'cache'),
    remote: 's3://fleet/team-a',
    remoteOptions: { endpoint: `http://127.0.0.1:${port}`, region: 'garage', accessKeyId: 'GK0123456789abcdef', secretAccessKey: secret },
  }).then(
    () => assert.fail('opened'),
    (e) => e,
  );
  assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  assert.ok(error instanceof CairnError, String(error));
  assert.equal(error.code, 'IO');
  assert.match(error.message, /s3:\/\/fleet\/team-a/);
  assert.ok(!error.message.includes(secret) && !String(error.stack).includes(secret));
});

test('remoteOptions without a remote are INVALID_ARGUMENT', async (t) => {
  const root = tempDir(t);
  await assert.rejects(
    Workspace.open(root, { store: path.join(tempDir(t), 'store'), remoteOptions: { region: 'x' } }),
    (e) => e instanceof CairnError && e.code === 'INVALID_ARGUMENT',
  );
});
