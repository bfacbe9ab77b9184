#!/usr/bin/env node
// An agent loop on a Cairn thread: each user message is checkpointed before the agent acts on
// it, tool calls are counted on the run, and when the user says "undo that" the thread goes
// back to before their previous message, files and conversation together.
//
//   node examples/thread-loop.mjs [project-dir]     (default: a fresh demo project in a temp dir)
// @ts-check
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Threads, Workspace } from 'cairn';

/** What the user types, turn by turn; the "agent" below turns each request into file edits. */
const userMessages = ['add a greeting', 'make it shout', 'undo that'];

/** @param {string} request @returns {Record<string, string>} the files the agent writes */
function agentEdits(request) {
  if (request === 'add a greeting') return { 'hello.txt': 'hello, world\n' };
  if (request === 'make it shout') return { 'hello.txt': 'HELLO, WORLD!!!\n', 'notes.md': 'shouting now\n' };
  return {};
}

async function main() {
  const root = process.argv[2] ?? fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-thread-'));
  const ws = await Workspace.open(root);
  // The thread database lives in the workspace's store; checkpoints before user messages.
  const threads = await Threads.open(null, { workspace: ws, checkpoints: { enabled: true } });
  try {
    const thread = await threads.create({ metadata: { agent: 'example' } });
    /** @type {string[]} ids of the user messages, in order */
    const asked = [];
    for (const text of userMessages) {
      if (text === 'undo that') {
        const previous = asked.at(-1);
        if (!previous) continue;
        const report = await threads.restoreBefore(thread.id, previous, { files: true });
        console.log(`undo: back to before "${threads.log(thread.id, { all: true }).find((e) => e.id === previous)?.payload}"`);
        console.log(`  restored ${report.files?.restore.restored.join(', ') || 'nothing'}, deleted ${report.files?.restore.deleted.join(', ') || 'nothing'}`);
        asked.pop();
        continue;
      }
      const run = await threads.beginRun(thread.id, { leaseMs: 60_000 });
      try {
        const msg = await run.append({ kind: 'user', text });
        asked.push(msg.entry.id);
        console.log(`user: ${text} (checkpoint ${msg.checkpoint?.snapshotId.slice(0, 12) ?? 'none'})`);
        for (const [file, content] of Object.entries(agentEdits(text))) {
          const call = await run.toolStart('write_file');
          fs.writeFileSync(path.join(root, file), content);
          await run.append({ kind: 'tool', text: `wrote ${file}` });
          await run.toolFinish(call);
        }
        await run.append({ kind: 'assistant', text: `did: ${text}` });
      } finally {
        await run.end();
        run.close();
      }
    }
    console.log('conversation:', threads.log(thread.id).map((e) => `${e.kind}: ${e.payload}`).join(' | '));
    for (const f of ['hello.txt', 'notes.md']) {
      const p = path.join(root, f);
      console.log(`${f}: ${fs.existsSync(p) ? JSON.stringify(fs.readFileSync(p, 'utf8')) : '(absent)'}`);
    }
  } finally {
    threads.close();
    ws.close();
  }
}

await main();
