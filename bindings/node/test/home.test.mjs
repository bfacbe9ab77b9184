// Where checkpoints live when no store is given (issue 19): outside the workspace, in the data
// directory ($CAIRN_HOME here), so that wiping the tree (as `git clean -fdx` or `rm -rf` do)
// loses nothing. Each test file runs in its own process: setting the variable here is local.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Workspace } from 'cairn';
import { read, tempDir, writeTree } from './helpers.mjs';

test('a workspace opened without a store keeps it in the data directory and survives a wipe', async (t) => {
  const dir = tempDir(t);
  const home = path.join(dir, 'cairn-home');
  process.env.CAIRN_HOME = home;
  delete process.env.CAIRN_STORE;
  const root = path.join(dir, 'project');
  fs.mkdirSync(path.join(root, '.git'), { recursive: true });
  writeTree(root, { 'src/main.c': 'int main(void) { return 0; }\n', 'untracked.txt': 'work not committed yet\n' });

  let ws = await Workspace.open(root);
  const info = ws.info();
  assert.equal(info.storeHome, 'data');
  assert.equal(path.dirname(info.store), path.join(home, 'stores'));
  assert.match(path.basename(info.store), /^project-[0-9a-f]{16}$/);
  const snap = await ws.snapshot({ label: 'before-wipe' });
  ws.close();
  assert.equal(fs.existsSync(path.join(root, '.cairn')), false);
  assert.equal(fs.statSync(home).mode & 0o777, 0o700);

  // The agent wipes every entry of the root but .git.
  for (const name of fs.readdirSync(root)) {
    if (name !== '.git') fs.rmSync(path.join(root, name), { recursive: true, force: true });
  }
  ws = await Workspace.open(root);
  t.after(() => ws.close());
  assert.deepEqual((await ws.list()).map((s) => s.id), [snap.id]);
  await ws.restore('before-wipe');
  assert.equal(read(root, 'untracked.txt'), 'work not committed yet\n');
  assert.equal(read(root, 'src/main.c'), 'int main(void) { return 0; }\n');

  // Another workspace opened the same way sees none of it.
  const other = path.join(dir, 'other');
  writeTree(other, { f: 'x\n' });
  const ow = await Workspace.open(other);
  t.after(() => ow.close());
  assert.deepEqual(await ow.list(), []);
  assert.notEqual(ow.info().store, info.store);
});
