#!/usr/bin/env bash
# The Node binding's test command (run by scripts/test): install with `npm ci` (its `prepare`
# step builds libcairn with cargo and the TypeScript with tsc), type-check the examples and the
# typings, then run the node --test suites. Fails when a test fails or when no test ran.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm run --silent typecheck
# Test trees go to tmpfs when there is one: thousands of small files are slow on a busy disk.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi
node scripts/run-tests.cjs
