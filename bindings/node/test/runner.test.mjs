// The test command itself: a run that finds no test fails, and the example agent loops run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './helpers.mjs';

const pkg = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

test('a test run that finds no test fails', (t) => {
  const empty = tempDir(t);
  let r = spawnSync(process.execPath, [path.join(pkg, 'scripts', 'run-tests.cjs'), empty], { encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /no test files/);
  // A test file without tests fails too.
  fs.writeFileSync(path.join(empty, 'nothing.test.mjs'), '// no tests here\n');
  r = spawnSync(process.execPath, [path.join(pkg, 'scripts', 'run-tests.cjs'), empty], { encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /nothing\.test\.mjs ran no test/);
  // Beside a file with a test, it still fails the run; alone, the file with a test passes.
  fs.writeFileSync(path.join(empty, 'one.test.mjs'), "import { test } from 'node:test';\ntest('one', () => {});\n");
  r = spawnSync(process.execPath, [path.join(pkg, 'scripts', 'run-tests.cjs'), empty], { encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  fs.rmSync(path.join(empty, 'nothing.test.mjs'));
  r = spawnSync(process.execPath, [path.join(pkg, 'scripts', 'run-tests.cjs'), empty], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^node: 1 passed, 0 failed$/m);
});

/** Runs an example with its temporary project under a directory removed after the test. */
function runExample(t, name) {
  const r = spawnSync(process.execPath, [path.join(pkg, 'examples', name)], {
    cwd: pkg,
    encoding: 'utf8',
    env: { ...process.env, TMPDIR: tempDir(t) },
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test('the example agent loop runs: it checkpoints, catches the broken step and restores', (t) => {
  const out = runExample(t, 'agent-loop.mjs');
  assert.match(out, /checks failed; 1 change\(s\) since turn 1: modified src\/math\.js/);
  assert.match(out, /restored src\/math\.js/);
  assert.match(out, /store verified/);
  assert.match(out, /exports\.add = \(a, b\) => a \+ b;/);
});

test('the example thread loop runs: checkpoints each message and undoes the last one, files included', (t) => {
  const out = runExample(t, 'thread-loop.mjs');
  assert.match(out, /undo: back to before "make it shout"/);
  assert.match(out, /restored hello\.txt, deleted notes\.md/);
  assert.match(out, /^hello\.txt: "hello, world\\n"$/m);
  assert.match(out, /^notes\.md: \(absent\)$/m);
});
