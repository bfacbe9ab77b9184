// The inbox of a thread (issue 59): a prompt queued while a run is under way waits; at the
// boundary it is delivered with its checkpoint taken then; a rewind cancels the one still
// queued, and its old key answers with the cancelled admission.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Threads } from 'cairn';
import { fixture, writeTree } from './helpers.mjs';

test('a queued prompt is delivered at the boundary with its checkpoint, and a rewind cancels the next', async (t) => {
  const { root, ws } = await fixture(t, { 'a.txt': 'v1\n' });
  const threads = await Threads.open(null, { workspace: ws, checkpoints: { enabled: true } });
  t.after(() => threads.close());
  await threads.create({ id: 'chat' });
  const start = await threads.append('chat', { kind: 'user', text: 'start' });

  const run = await threads.beginRun('chat', { leaseMs: 60_000 });
  const queued = await threads.enqueue('chat', 'k-1', { text: 'second' });
  assert.equal(queued.state, 'queued');
  assert.equal(queued.repeated, false);
  assert.equal(queued.payload, 'second');
  const waiting = await threads.deliver('chat');
  assert.equal(waiting.delivered, null);
  assert.equal(waiting.queued, 1);
  assert.match(waiting.waiting, new RegExp(run.id));
  await run.end();
  run.close();

  writeTree(root, { 'later.txt': 'written before the delivery\n' });
  const d = await threads.deliver('chat');
  assert.equal(d.delivered.state, 'delivered');
  assert.equal(d.entry.payload, 'second');
  assert.equal(d.entry.key, 'k-1');
  assert.equal(d.delivered.checkpointId, d.checkpoint.id);

  await threads.enqueue('chat', 'k-2', { text: 'third' });
  const report = await threads.rewind('chat', start.entry.id);
  const again = await threads.enqueue('chat', 'k-2', { text: 'third' });
  assert.equal(again.state, 'cancelled');
  assert.equal(again.repeated, true);
  assert.equal(again.rewindId, report.rewindId);
  assert.equal((await threads.deliver('chat')).delivered, null);
  assert.deepEqual(
    threads.inbox('chat').map((a) => [a.key, a.state]),
    [
      ['k-1', 'delivered'],
      ['k-2', 'cancelled'],
    ],
  );
});
