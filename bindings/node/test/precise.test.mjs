// Precise restores (issue 31): chosen paths only, and drift with 'keep'.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CairnError } from 'cairn';
import { fixture, read, writeTree } from './helpers.mjs';

const mtime = (root, rel) => fs.statSync(path.join(root, rel)).mtimeMs;

test('a restore of chosen paths touches nothing else, and its safety snapshot undoes it', async (t) => {
  const { root, ws } = await fixture(t, { 'a/one.txt': 'one\n', 'b/two.txt': 'two\n' });
  const base = await ws.snapshot();
  writeTree(root, { 'a/one.txt': 'one, edited\n', 'a/new.txt': 'new\n', 'b/two.txt': 'two, edited\n' });
  const outside = mtime(root, 'b/two.txt');

  const plan = await ws.plan(base.id, { paths: ['a'] });
  assert.deepEqual(plan.paths, ['a']);
  assert.deepEqual([...plan.restored, ...plan.deleted].sort(), ['a/new.txt', 'a/one.txt']);
  const report = await ws.apply(plan);
  assert.deepEqual(report.paths, ['a']);
  assert.equal(read(root, 'a/one.txt'), 'one\n');
  assert.ok(!fs.existsSync(path.join(root, 'a/new.txt')));
  assert.equal(read(root, 'b/two.txt'), 'two, edited\n');
  assert.equal(mtime(root, 'b/two.txt'), outside);

  const undo = await ws.restore(report.safetySnapshotId, { paths: ['a'] });
  assert.deepEqual(undo.paths, ['a']);
  assert.equal(read(root, 'a/new.txt'), 'new\n');
  assert.equal(mtime(root, 'b/two.txt'), outside);

  await assert.rejects(ws.restore(base.id, { paths: ['no/such'] }), (e) => e instanceof CairnError && e.code === 'NOT_FOUND');
});

test("drift kept with onDrift 'keep'", async (t) => {
  const { root, ws } = await fixture(t, { 'a.txt': 'a0\n', 'b.txt': 'b0\n' });
  const first = await ws.snapshot();
  writeTree(root, { 'a.txt': 'a1\n', 'b.txt': 'b1\n' });
  const second = await ws.snapshot();
  writeTree(root, { 'b.txt': 'by someone else\n' });
  const kept = await ws.restore(first.id, { reference: second.id, onDrift: 'keep' });
  assert.deepEqual(kept.drifted, ['b.txt']);
  assert.equal(read(root, 'a.txt'), 'a0\n');
  assert.equal(read(root, 'b.txt'), 'by someone else\n');
});

test('a diff with attribution names the tool call of each change and the Bash call of a shell command', async (t) => {
  const { execFileSync } = await import('node:child_process');
  const { root, ws } = await fixture(t, { 'a.txt': 'a0\n', 'b.txt': 'b0\n', 'c.txt': 'c0\n' });
  const start = await ws.snapshot({ label: 'before the turn' });
  // What an agent's hooks record: a checkpoint before each tool call, naming the call.
  await ws.snapshot({ label: 'toolu_1', metadata: { tool_use_id: 'toolu_1', tool_name: 'Edit' } });
  writeTree(root, { 'a.txt': 'a1\n' });
  await ws.snapshot({ label: 'toolu_2', metadata: { tool_use_id: 'toolu_2', tool_name: 'Edit', agent_id: 'agent-7' } });
  writeTree(root, { 'b.txt': 'b1\n' });
  await ws.snapshot({ label: 'toolu_3', metadata: { tool_use_id: 'toolu_3', tool_name: 'Bash' } });
  execFileSync('sh', ['-c', 'echo shell > c.txt && echo made > d.txt'], { cwd: root });

  const plain = await ws.diff(start.id);
  assert.ok(plain.every((c) => c.attribution === undefined));
  const changes = await ws.diff(start.id, null, { attribute: true });
  const who = Object.fromEntries(
    changes.map((c) => [c.path, c.attribution.map((a) => [a.toolUseId, a.toolName, a.agentId ?? null])]),
  );
  assert.deepEqual(who, {
    'a.txt': [['toolu_1', 'Edit', null]],
    'b.txt': [['toolu_2', 'Edit', 'agent-7']],
    'c.txt': [['toolu_3', 'Bash', null]],
    'd.txt': [['toolu_3', 'Bash', null]],
  });
  assert.equal(changes.find((c) => c.path === 'd.txt').attribution[0].to, null);
});
