#!/usr/bin/env node
// Runs `node --test` on the given paths (default: test/), printing the spec report, and fails
// when a test fails or when no test ran at all: a run that found nothing to test must not pass.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const given = process.argv.slice(2);
if (given.length === 0) given.push(path.join(__dirname, '..', 'test'));
// A directory stands for its *.test.{mjs,cjs,js} files (helpers beside them are not tests).
const targets = given.flatMap((t) =>
  fs.statSync(t).isDirectory()
    ? fs
        .readdirSync(t)
        .filter((f) => /\.test\.[cm]?js$/.test(f))
        .sort()
        .map((f) => path.join(t, f))
    : [t],
);
if (targets.length === 0) {
  console.error(`node: no test files in ${given.join(' ')}; a run without tests fails`);
  process.exit(1);
}
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-tests-'));
const tap = path.join(tmp, 'report.tap');
const r = spawnSync(
  process.execPath,
  [
    '--test',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    '--test-reporter=tap',
    `--test-reporter-destination=${tap}`,
    ...targets,
  ],
  // Started from inside a test (the runner's own test does so), node would skip the files.
  { stdio: 'inherit', env: { ...process.env, NODE_TEST_CONTEXT: undefined } },
);
const report = fs.existsSync(tap) ? fs.readFileSync(tap, 'utf8') : '';
fs.rmSync(tmp, { recursive: true, force: true });
function escapeRe(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
const count = (name) => {
  const m = report.match(new RegExp(`^# ${name} (\\d+)$`, 'm'));
  return m ? Number(m[1]) : 0;
};
// Node 20 reports a file that registered no test as one passing "test" named after the file:
// those are not tests.
const empty = targets.filter((f) => new RegExp(`^ok \\d+ - ${escapeRe(f)}$`, 'm').test(report));
const tests = count('tests') - empty.length;
const pass = count('pass') - empty.length;
const fail = count('fail');
if (r.status !== 0 || fail > 0) {
  console.error(`node: ${pass} passed, ${fail} failed (exit ${r.status})`);
  process.exit(r.status || 1);
}
if (empty.length > 0) {
  console.error(`node: ${empty.join(', ')} ran no test; a test file without tests fails`);
  process.exit(1);
}
if (tests === 0 || pass === 0) {
  console.error(`node: no test ran in ${given.join(' ')}; a run without tests fails`);
  process.exit(1);
}
console.log(`node: ${pass} passed, ${fail} failed`);
