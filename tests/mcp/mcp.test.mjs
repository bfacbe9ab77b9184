// `cairn mcp` driven by the official MCP client SDK (@modelcontextprotocol/sdk from npm) over
// stdio, as an agent drives it. Run by scripts/test-mcp, which installs the pinned SDK under
// target/ and sets CAIRN (the binary) and MCP_SDK_DIR (where the SDK is).
//
// What the tools answer is compared with what the command line's --json prints for the same
// question, so the structured content keeps the CLI's field names.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const CAIRN = process.env.CAIRN;
const SDK = process.env.MCP_SDK_DIR;
assert.ok(CAIRN && SDK, 'CAIRN and MCP_SDK_DIR must be set (scripts/test-mcp sets them)');
const sdk = (p) =>
  import(pathToFileURL(path.join(SDK, 'node_modules/@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');

const WORK = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-mcp-'));
const P = path.join(WORK, 'project');
const ENV = { CAIRN_HOME: path.join(WORK, 'cairn-home'), PATH: process.env.PATH ?? '' };

// Every byte value, so "byte for byte" covers more than text.
const BINARY = Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7) % 256));
const ORIGINAL = {
  'a.txt': Buffer.from('alpha\nbeta\ngamma\n'),
  'dir/b.txt': Buffer.from('bee\n'),
  'bin.dat': BINARY,
};

let client;
let serverStderr = '';

/** `cairn -C P --json ARGS`, parsed. */
function cli(...args) {
  const out = execFileSync(CAIRN, ['-C', P, '--json', ...args], {
    env: { ...process.env, ...ENV },
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

/** Calls a tool; fails the test on a protocol error, returns the result otherwise. */
async function call(name, args = {}) {
  return client.callTool({ name, arguments: args });
}

/** Calls a tool that must succeed and returns its structured content. */
async function ok(name, args = {}) {
  const r = await call(name, args);
  assert.notEqual(r.isError, true, `${name} ${JSON.stringify(args)} failed: ${JSON.stringify(r)}`);
  assert.equal(typeof r.structuredContent, 'object', `${name}: no structured content`);
  assert.ok(r.content.some((c) => c.type === 'text' && c.text.length > 0), `${name}: no text`);
  return r.structuredContent;
}

function read(rel) {
  return fs.readFileSync(path.join(P, rel));
}

function write(rel, data) {
  fs.mkdirSync(path.dirname(path.join(P, rel)), { recursive: true });
  fs.writeFileSync(path.join(P, rel), data);
}

before(async () => {
  for (const [rel, data] of Object.entries(ORIGINAL)) write(rel, data);
  fs.chmodSync(path.join(P, 'bin.dat'), 0o755);
  const transport = new StdioClientTransport({
    command: CAIRN,
    args: ['-C', P, 'mcp'],
    env: ENV,
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d) => {
    serverStderr += d;
  });
  client = new Client({ name: 'cairn-mcp-test', version: '1.0.0' });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  if (process.env.MCP_KEEP === '1') {
    console.log(`kept ${WORK}`);
  } else {
    fs.rmSync(WORK, { recursive: true, force: true });
  }
  if (serverStderr.trim()) console.log(`server stderr:\n${serverStderr}`);
});

test('initialize names the server and the workspace it serves', () => {
  assert.equal(client.getServerVersion().name, 'cairn');
  assert.ok(client.getServerCapabilities().tools, 'the server offers tools');
  assert.match(client.getInstructions(), new RegExp(P.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
});

test('the seven tools are listed with their arguments, and only restore and rewind are destructive', async () => {
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(Object.keys(byName).sort(), [
    'checkpoint', 'diff', 'list_checkpoints', 'list_threads', 'restore', 'rewind', 'thread_log',
  ]);
  const args = (t) => Object.keys(byName[t].inputSchema.properties ?? {}).sort();
  const required = (t) => (byName[t].inputSchema.required ?? []).slice().sort();
  assert.deepEqual(args('checkpoint'), ['label']);
  assert.deepEqual(required('checkpoint'), []);
  assert.deepEqual(args('list_checkpoints'), []);
  assert.deepEqual(args('diff'), ['attribute', 'from', 'patch', 'to']);
  assert.deepEqual(required('diff'), ['from']);
  assert.deepEqual(args('restore'), ['dry_run', 'on_drift', 'paths', 'snapshot']);
  assert.deepEqual(required('restore'), ['dry_run', 'snapshot']);
  assert.deepEqual(args('rewind'), ['dry_run', 'entry', 'files', 'key', 'on_drift', 'paths', 'thread']);
  assert.deepEqual(required('rewind'), ['dry_run', 'entry', 'thread']);
  assert.deepEqual(args('list_threads'), []);
  assert.deepEqual(args('thread_log'), ['thread']);
  for (const t of ['restore', 'rewind']) {
    assert.equal(byName[t].annotations?.destructiveHint, true, `${t} is marked destructive`);
    assert.match(byName[t].description, /dry_run: true first/, `${t} says a dry run comes first`);
  }
  for (const t of ['list_checkpoints', 'diff', 'list_threads', 'thread_log']) {
    assert.equal(byName[t].annotations?.readOnlyHint, true, `${t} is read-only`);
  }
  assert.equal(byName.checkpoint.annotations?.destructiveHint, false);
});

let before_id;

test('checkpoint takes a snapshot and answers with the fields of `cairn snapshot --json`', async () => {
  const s = await ok('checkpoint', { label: 'before' });
  assert.match(s.id, /^[0-9a-f]{64}$/);
  assert.equal(s.label, 'before');
  assert.equal(s.stats.files, 3);
  assert.deepEqual(s.skipped, []);
  assert.deepEqual(Object.keys(s).sort(), ['id', 'label', 'root', 'skipped', 'stats', 'workspace_id']);
  before_id = s.id;
  const listed = await ok('list_checkpoints');
  assert.deepEqual(listed, cli('list'), 'list_checkpoints is `cairn list --json`');
  assert.equal(listed.snapshots.at(-1).id, before_id, 'newest last');
});

test('diff with patch shows each changed path, its kind and a unified patch', async () => {
  write('a.txt', 'alpha\nBETA\ngamma\n');
  fs.rmSync(path.join(P, 'dir/b.txt'));
  write('c.txt', 'new file\n');
  write('bin.dat', Buffer.concat([BINARY, Buffer.from([0, 1, 2])]));
  const d = await ok('diff', { from: 'before', patch: true });
  assert.equal(d.from, before_id);
  assert.equal(d.to, null);
  assert.deepEqual(
    d.changes.map((c) => [c.path, c.kind]),
    [['a.txt', 'modified'], ['bin.dat', 'modified'], ['c.txt', 'added'], ['dir/b.txt', 'deleted']],
  );
  const a = d.changes.find((c) => c.path === 'a.txt');
  assert.match(a.patch, /^-beta$/m);
  assert.match(a.patch, /^\+BETA$/m);
  assert.equal(d.changes.find((c) => c.path === 'bin.dat').binary, true);
  assert.deepEqual(d, cli('diff', 'before', '--patch'), 'diff is `cairn diff --patch --json`');
  const plain = await ok('diff', { from: before_id.slice(0, 12) });
  assert.ok(plain.changes.every((c) => !('patch' in c)), 'no patch unless asked');
});

test('a dry-run restore answers the exact plan and changes nothing', async () => {
  const plan = await ok('restore', { snapshot: 'before', dry_run: true });
  assert.equal(plan.dry_run, true);
  assert.deepEqual(plan.restored.slice().sort(), ['a.txt', 'bin.dat', 'dir/b.txt']);
  assert.deepEqual(plan.deleted, ['c.txt']);
  assert.ok(Array.isArray(plan.kept));
  assert.equal(plan.safety_snapshot_id, null);
  assert.deepEqual(plan, cli('restore', 'before', '--dry-run'), 'the plan is `cairn restore --dry-run --json`');
  assert.equal(read('a.txt').toString(), 'alpha\nBETA\ngamma\n', 'nothing changed');
  assert.ok(fs.existsSync(path.join(P, 'c.txt')));
});

test('a restore of chosen paths plans only them, as `cairn restore -- PATH` does', async () => {
  const plan = await ok('restore', { snapshot: 'before', dry_run: true, paths: ['dir'], on_drift: 'keep' });
  assert.deepEqual(plan.paths, ['dir']);
  assert.deepEqual(plan.restored, ['dir/b.txt']);
  assert.deepEqual(plan.deleted, []);
  assert.deepEqual(plan, cli('restore', 'before', '--dry-run', '--on-drift', 'keep', '--', 'dir'));
  const bad = await call('restore', { snapshot: 'before', dry_run: true, on_drift: 'sideways' });
  assert.equal(bad.isError, true);
});

test('restore puts every file back byte for byte and names its safety snapshot', async () => {
  const r = await ok('restore', { snapshot: 'before', dry_run: false });
  assert.equal(r.dry_run, false);
  assert.match(r.safety_snapshot_id, /^[0-9a-f]{64}$/);
  assert.deepEqual(r.deleted, ['c.txt']);
  for (const [rel, data] of Object.entries(ORIGINAL)) {
    assert.ok(read(rel).equals(data), `${rel} is back byte for byte`);
  }
  assert.equal(fs.statSync(path.join(P, 'bin.dat')).mode & 0o777, 0o755, 'its mode too');
  assert.ok(!fs.existsSync(path.join(P, 'c.txt')), 'the added file is gone');
  // The safety snapshot holds the files as they were before the restore.
  const undo = await ok('diff', { from: r.safety_snapshot_id });
  assert.deepEqual(undo.changes.map((c) => c.path).sort(), ['a.txt', 'bin.dat', 'c.txt', 'dir/b.txt']);
});

test('an unknown snapshot is a tool error with its kind, and the server answers the next call', async () => {
  const r = await call('restore', { snapshot: 'no-such-checkpoint', dry_run: true });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error.kind, 'NOT_FOUND');
  assert.equal(r.structuredContent.error.exit_code, 12);
  assert.match(r.structuredContent.error.message, /no-such-checkpoint/);
  assert.match(r.content[0].text, /^NOT_FOUND: /);
  const d = await call('checkpoint', { label: '  ' });
  assert.equal(d.isError, true);
  assert.equal(d.structuredContent.error.kind, 'USAGE', JSON.stringify(d));
  const t = await call('thread_log', { thread: 'nobody' });
  assert.equal(t.isError, true);
  assert.equal(t.structuredContent.error.kind, 'NOT_FOUND');
  const listed = await ok('list_checkpoints');
  assert.ok(listed.snapshots.length >= 2, 'the server still answers');
});

test('arguments of the wrong shape are refused, and the server answers the next call', async () => {
  // rmcp answers a missing argument as a tool error (the 2025-11-25 protocol's input
  // validation errors), before any command runs.
  const r = await call('restore', { snapshot: 'before' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /dry_run/);
  await assert.rejects(() => call('no_such_tool'), /tool not found/i);
  await ok('list_checkpoints');
});

test('list_threads, thread_log and rewind work on a thread the command line keeps', async () => {
  cli('thread', 'new', '--id', 'chat');
  cli('thread', 'append', 'chat', '--kind', 'user', '--text', 'first');
  write('a.txt', 'as the second message found it\n');
  const second = cli('thread', 'append', 'chat', '--kind', 'user', '--text', 'second').entry.id;
  cli('thread', 'append', 'chat', '--kind', 'assistant', '--text', 'I changed a.txt');
  write('a.txt', 'changed after the second message\n');

  const threads = await ok('list_threads');
  assert.deepEqual(threads, cli('thread', 'list'), 'list_threads is `cairn thread list --json`');
  assert.deepEqual(threads.threads.map((t) => t.id), ['chat']);

  const log = await ok('thread_log', { thread: 'chat' });
  assert.deepEqual(log, cli('thread', 'log', 'chat'), 'thread_log is `cairn thread log --json`');
  assert.deepEqual(log.entries.map((e) => [e.kind, e.text]), [
    ['user', 'first'], ['user', 'second'], ['assistant', 'I changed a.txt'],
  ]);
  assert.ok(log.entries.filter((e) => e.kind === 'user').every((e) => e.checkpoint?.snapshot_id));

  const plan = await ok('rewind', { thread: 'chat', entry: second, files: true, dry_run: true });
  assert.equal(plan.dry_run, true);
  assert.equal(plan.to_entry_id, second);
  assert.deepEqual(plan.files.restore.restored, ['a.txt']);
  assert.equal(read('a.txt').toString(), 'changed after the second message\n', 'nothing changed');

  const done = await ok('rewind', { thread: 'chat', entry: second, files: true, dry_run: false });
  assert.equal(done.dry_run, false);
  assert.equal(done.conversation.cut.length, 1, 'the assistant entry left the active branch');
  assert.match(done.files.safety_snapshot_id, /^[0-9a-f]{64}$/);
  assert.equal(read('a.txt').toString(), 'as the second message found it\n');
  const after = await ok('thread_log', { thread: 'chat' });
  assert.deepEqual(after.entries.map((e) => e.text), ['first', 'second']);
});
