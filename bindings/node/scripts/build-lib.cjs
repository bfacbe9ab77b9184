#!/usr/bin/env node
// Builds libcairn for the binding (`cargo build --release -p cairn-ffi` at the repository root),
// so `npm install` in bindings/node is the only step on a fresh machine. Skipped when CAIRN_LIB
// points at a library already, or with CAIRN_SKIP_BUILD=1.
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');

if (process.env.CAIRN_LIB || process.env.CAIRN_SKIP_BUILD === '1') {
  console.log('cairn: not building libcairn (CAIRN_LIB or CAIRN_SKIP_BUILD is set)');
  process.exit(0);
}
const repo = path.resolve(__dirname, '..', '..', '..');
const r = spawnSync('cargo', ['build', '--release', '-p', 'cairn-ffi'], { cwd: repo, stdio: 'inherit' });
if (r.error && r.error.code === 'ENOENT') {
  console.warn(
    'cairn: cargo is not installed, so libcairn was not built. Install Rust (https://rustup.rs) and run ' +
      '`cargo build --release -p cairn-ffi` in the repository root, or set CAIRN_LIB to a built libcairn.',
  );
  process.exit(0);
}
process.exit(r.status ?? 1);
