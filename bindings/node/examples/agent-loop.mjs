#!/usr/bin/env node
// An agent loop with Cairn: a checkpoint before every tool call, a hold while a command runs,
// and a restore when a step breaks the build. The "model" here is a fixed script of steps so
// the example runs anywhere; swap `nextStep` for your model call.
//
//   node examples/agent-loop.mjs [project-dir]     (default: a fresh demo project in a temp dir)
// @ts-check
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { CairnError, Workspace } from 'cairn';

/** @typedef {{ tool: 'write', path: string, content: string } | { tool: 'run', command: string[] }} Step */

/** The steps a model might take: fix a bug, break the build, then run the checks. */
const script = /** @type {Step[]} */ ([
  { tool: 'write', path: 'src/math.js', content: 'exports.add = (a, b) => a + b;\n' },
  { tool: 'run', command: [process.execPath, 'check.js'] },
  { tool: 'write', path: 'src/math.js', content: 'exports.add = (a, b) => a - b; // "refactor"\n' },
  { tool: 'run', command: [process.execPath, 'check.js'] },
]);

/** @param {number} turn @returns {Step | undefined} */
const nextStep = (turn) => script[turn];

function demoProject() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-agent-'));
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'src', 'math.js'), 'exports.add = (a, b) => a * b; // bug\n');
  fs.writeFileSync(
    path.join(dir, 'check.js'),
    "const { add } = require('./src/math.js');\nif (add(2, 3) !== 5) { console.error('add(2, 3) is', add(2, 3)); process.exit(1); }\nconsole.log('checks pass');\n",
  );
  return dir;
}

async function main() {
  const root = process.argv[2] ?? demoProject();
  // `await using ws = ...` closes it at the end of the scope where the syntax is available.
  const ws = await Workspace.open(root, { excludes: ['*.tmp'], retain: { count: 50 } });
  try {
    for (let turn = 0; ; turn++) {
      const step = nextStep(turn);
      if (!step) break;
      // A checkpoint before every tool call; it runs on a worker thread, so the agent's event
      // loop (streams, timers, other sessions) keeps going meanwhile.
      const before = await ws.snapshot({
        label: `turn-${turn}`,
        metadata: { turn, tool: step.tool },
        signal: AbortSignal.timeout(30_000),
        onProgress: (p) => void (p.files > 10_000 && console.log(`  ... ${p.files} files`)),
      });
      console.log(`turn ${turn}: ${step.tool} (checkpoint ${before.id.slice(0, 12)}, ${before.stats.files} files)`);

      if (step.tool === 'write') {
        fs.writeFileSync(path.join(root, step.path), step.content);
        continue;
      }
      // While the command runs, nobody may restore files under it.
      const hold = ws.hold(step.command.join(' '));
      let status;
      try {
        status = spawnSync(step.command[0], step.command.slice(1), { cwd: root, stdio: 'inherit' }).status;
      } finally {
        hold.release();
      }
      if (status === 0) continue;

      // The checks broke: find the last checkpoint where they passed and go back to it.
      const good = ws.show(`turn-${turn - 2}`);
      const changes = await ws.diff(good.id);
      console.log(`  checks failed; ${changes.length} change(s) since turn ${turn - 2}: ${changes.map((c) => `${c.kind} ${c.path}`).join(', ')}`);
      const plan = await ws.plan(good.id);
      const report = await ws.apply(plan);
      console.log(`  restored ${report.restored.join(', ')}; undo with restore('${report.safetySnapshotId?.slice(0, 12)}')`);
    }
    const verified = await ws.verify();
    console.log(`done: ${ws.list().length} checkpoints, store ${verified.ok ? 'verified' : 'DAMAGED'}`);
    console.log(fs.readFileSync(path.join(root, 'src', 'math.js'), 'utf8').trim());
  } catch (e) {
    if (e instanceof CairnError) console.error(`cairn: ${e.code}: ${e.message}${e.path ? ` (${e.path})` : ''}`);
    throw e;
  } finally {
    ws.close();
  }
}

await main();
