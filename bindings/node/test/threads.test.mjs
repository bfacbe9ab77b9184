// The thread API (cairn_threads_*): threads whose user messages carry checkpoints, runs with
// leases and tool calls, memory, rewind and restore-before with files, fork, events; and the
// error codes only threads raise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CairnError, Run, Threads, UseAfterCloseError, Workspace, pathToBuffer } from 'cairn';
import { fixture, read, writeTree } from './helpers.mjs';

const ON = { enabled: true };

/** A workspace with a.txt, and a thread database in its store with checkpoints on. */
async function threadsFixture(t) {
  const fx = await fixture(t, { 'a.txt': 'v1\n' });
  const threads = await Threads.open(null, { workspace: fx.ws, checkpoints: ON });
  t.after(() => threads.close());
  return { ...fx, threads };
}

const expectCode = (code) => (e) => e instanceof CairnError && e.code === code;

test('a thread: appends with checkpoints, a run with tool calls, memory, restore-before with files', async (t) => {
  const { root, ws, store, threads } = await threadsFixture(t);
  assert.ok(fs.existsSync(path.join(store, 'threads.db')));
  const thread = await threads.create({ metadata: { model_name: 'gpt' } });
  assert.match(thread.id, /^t_/);
  assert.deepEqual(thread.metadata, { model_name: 'gpt' });
  assert.deepEqual(threads.list().map((x) => x.id), [thread.id]);

  const run = await threads.beginRun(thread.id, { leaseMs: 60_000 });
  assert.ok(run instanceof Run);
  assert.match(run.id, /^r_/);
  assert.equal(run.threadId, thread.id);
  assert.deepEqual(threads.runs(thread.id).going.map((r) => r.id), [run.id]);

  const first = await run.append({ kind: 'user', text: 'make it v2', metadata: { turn: 1 } });
  assert.equal(first.repeated, false);
  assert.equal(first.checkpointError, null);
  assert.equal(first.checkpoint.kind, 'user', 'a checkpoint before the user message');
  assert.equal(first.entry.payload, 'make it v2');
  assert.equal(first.entry.metadata.turn, 1);
  assert.equal(first.entry.checkpoint.snapshotId, first.checkpoint.snapshotId);
  assert.equal(first.entry.runId, run.id);

  const call = await run.toolStart('edit_file');
  assert.equal(threads.runs(thread.id).going[0].openToolCalls, 1);
  writeTree(root, { 'a.txt': 'v2\n', 'b.txt': 'new\n' });
  await run.toolFinish(call);
  assert.equal(threads.runs(thread.id).going[0].openToolCalls, 0);
  await run.append({ kind: 'assistant', text: 'done' });
  await run.heartbeat();

  const second = await run.append({ kind: 'user', text: 'now v3', key: 'msg-2' });
  assert.equal((await run.append({ kind: 'user', text: 'now v3', key: 'msg-2' })).repeated, true, 'the key admits it once');
  writeTree(root, { 'a.txt': 'v3\n' });
  const manual = await run.checkpoint('after-v3');
  assert.equal(manual.kind, 'manual');
  assert.equal(manual.label, 'after-v3');
  assert.equal(ws.show(manual.snapshotId).id, manual.snapshotId, 'a checkpoint is a snapshot of the workspace');
  assert.deepEqual(threads.listCheckpoints(thread.id).map((c) => c.kind), ['user', 'user', 'manual']);

  const fact = await threads.addMemory(thread.id, { kind: 'item', text: 'the user wants v3', standsOn: [second.entry.id] });
  assert.equal(fact.status, 'active');
  assert.deepEqual(threads.memory(thread.id).map((m) => m.id), [fact.id]);
  assert.deepEqual(threads.log(thread.id).map((e) => e.payload), ['make it v2', 'done', 'now v3']);
  assert.equal(await run.end(), 'ended');
  assert.deepEqual(threads.runs(thread.id).going, []);

  // "Restore before this prompt": the files as they were when "now v3" was sent.
  const dry = await threads.restoreBefore(thread.id, second.entry.id, { files: true, dryRun: true });
  assert.equal(dry.dryRun, true);
  assert.equal(read(root, 'a.txt'), 'v3\n');
  const report = await threads.restoreBefore(thread.id, second.entry.id, { files: true });
  assert.equal(report.conversation.rewound, true);
  assert.deepEqual(report.conversation.cut, [second.entry.id]);
  assert.deepEqual(report.memory.staled, [fact.id]);
  assert.equal(report.files.exact, true);
  assert.deepEqual(report.files.restore.restored, ['a.txt']);
  assert.match(report.files.safetySnapshotId, /^[0-9a-f]{64}$/);
  assert.equal(read(root, 'a.txt'), 'v2\n');
  assert.equal(read(root, 'b.txt'), 'new\n');
  assert.deepEqual(threads.log(thread.id).map((e) => e.payload), ['make it v2', 'done']);
  assert.equal(threads.log(thread.id, { all: true }).length, 3, 'nothing is deleted');

  // Rewind to the first message: the conversation and the files go back to it.
  const back = await threads.rewind(thread.id, first.entry.id, { files: true });
  assert.deepEqual(back.conversation.cut.length, 1);
  assert.equal(read(root, 'a.txt'), 'v1\n');
  assert.ok(!fs.existsSync(path.join(root, 'b.txt')));
});

test('a fork with files gives another workspace the files as they were at the entry', async (t) => {
  const { dir, root, ws, threads } = await threadsFixture(t);
  const thread = await threads.create();
  const first = await threads.append(thread.id, { kind: 'user', text: 'one' });
  writeTree(root, { 'a.txt': 'v2\n' }); // what turn "one" did
  await threads.append(thread.id, { kind: 'user', text: 'two' });
  writeTree(root, { 'a.txt': 'v3\n' }); // what turn "two" did
  const otherRoot = path.join(dir, 'fork');
  fs.mkdirSync(otherRoot);
  const other = await Workspace.open(otherRoot);
  t.after(() => other.close());
  const fork = await threads.fork(thread.id, first.entry.id, {
    files: true,
    workspace: other,
    source: ws,
    newThreadId: 'experiment',
    metadata: { why: 'try another way' },
  });
  assert.equal(fork.threadId, 'experiment');
  assert.equal(fork.sourceThreadId, thread.id);
  assert.equal(fork.atEntryId, first.entry.id);
  assert.ok(fork.snapshotsCopied.length >= 1);
  // The fork holds turn "one" whole: the files as they were when "two" was sent.
  assert.equal(read(otherRoot, 'a.txt'), 'v2\n');
  assert.equal(read(root, 'a.txt'), 'v3\n', 'the source workspace is untouched');
  assert.deepEqual(threads.log('experiment').map((e) => e.payload), ['one']);
  assert.deepEqual(threads.list().find((x) => x.id === 'experiment').metadata, { why: 'try another way' });

  // Events: every process sees the same log; the cursor pages through it.
  const all = threads.events();
  assert.ok(all.some((e) => e.kind === 'fork_created' && e.data.threadId === 'experiment' && e.data.files === true));
  assert.ok(all.some((e) => e.kind === 'checkpoint_created' && typeof e.data.snapshotId === 'string'));
  const page = threads.events({ limit: 2 });
  assert.equal(page.length, 2);
  const rest = threads.events({ cursor: page[1].cursor });
  assert.deepEqual([...page, ...rest].map((e) => e.cursor), all.map((e) => e.cursor));
});

test('a payload that is not UTF-8 round-trips as an escaped string', async (t) => {
  const { threads } = await threadsFixture(t);
  const thread = await threads.create();
  const bytes = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0xff]);
  const appended = await threads.append(thread.id, { kind: 'tool', payload: bytes });
  assert.equal(appended.entry.payload, 'caf\udce9\udcff');
  assert.deepEqual(pathToBuffer(threads.log(thread.id)[0].payload), bytes);
  await assert.rejects(threads.append(thread.id, { kind: 'note', text: 'x', payload: bytes }), TypeError);
});

test('thread errors: VALIDATION, NOT_FOUND, THREAD_BUSY, RUN_INTERRUPTED, WORKSPACE_BUSY, INVALID_ARGUMENT', async (t) => {
  const { threads } = await threadsFixture(t);
  const thread = await threads.create({ id: 'main' });
  await assert.rejects(threads.create({ id: 'main' }), expectCode('VALIDATION'));
  await assert.rejects(threads.append('no-such-thread', { kind: 'user', text: 'x' }), expectCode('NOT_FOUND'));
  assert.throws(() => threads.log('no-such-thread'), expectCode('NOT_FOUND'));
  await assert.rejects(threads.append(thread.id, { kind: 'shout', text: 'x' }), expectCode('INVALID_ARGUMENT'));
  await assert.rejects(threads.beginRun(thread.id, { leaseMs: 0 }), expectCode('INVALID_ARGUMENT'));
  await assert.rejects(Threads.open(null), expectCode('INVALID_ARGUMENT'), 'no path and no workspace');

  const one = await threads.append(thread.id, { kind: 'user', text: 'one' });
  await threads.append(thread.id, { kind: 'user', text: 'two' });
  const run = await threads.beginRun(thread.id, { leaseMs: 60_000 });
  // A rewind refuses while a run of the thread goes on ...
  await assert.rejects(threads.rewind(thread.id, one.entry.id, { leaseWaitMs: 10 }), expectCode('THREAD_BUSY'));
  // ... another thread's run in the same workspace refuses a rewind with files ...
  const other = await threads.create();
  const going = await threads.append(other.id, { kind: 'user', text: 'elsewhere' });
  await assert.rejects(threads.rewind(other.id, going.entry.id, { files: true, leaseWaitMs: 10 }), expectCode('WORKSPACE_BUSY'));
  // ... and with force the rewind interrupts the run, whose next call is refused.
  const forced = await threads.rewind(thread.id, one.entry.id, { force: true, leaseWaitMs: 10 });
  assert.deepEqual(forced.runs.interrupted, [run.id]);
  await assert.rejects(run.heartbeat(), expectCode('RUN_INTERRUPTED'));
  await assert.rejects(run.toolStart('edit'), expectCode('RUN_INTERRUPTED'));
  assert.equal(await run.end(), 'interrupted');
});

test('thread handles: several calls at once, close twice, use after close', async (t) => {
  const { ws, store, threads } = await threadsFixture(t);
  const [a, b] = await Promise.all([threads.create({ id: 'a' }), threads.create({ id: 'b' })]);
  const appended = await Promise.all(
    Array.from({ length: 6 }, (_, i) => threads.append(i % 2 ? a.id : b.id, { kind: 'note', text: `n${i}` })),
  );
  assert.equal(new Set(appended.map((x) => x.entry.id)).size, 6);
  assert.equal(threads.log('a').length + threads.log('b').length, 6);

  // A second handle on the same database, opened by path, sees the same threads.
  const byPath = Threads.openSync(path.join(store, 'threads.db'), { workspace: ws });
  assert.deepEqual(byPath.list().map((x) => x.id).sort(), ['a', 'b']);
  const run = await byPath.beginRun('a');
  run.close();
  run.close();
  run[Symbol.dispose](); // after close: nothing to do
  await assert.rejects(run.heartbeat(), (e) => e instanceof UseAfterCloseError);
  assert.equal(byPath.runs('a').going.length, 1, 'closing the handle does not end the run');
  byPath.close();
  byPath.close();
  assert.throws(() => byPath.list(), (e) => e instanceof UseAfterCloseError);
  await assert.rejects(byPath.create(), (e) => e instanceof UseAfterCloseError);
});
