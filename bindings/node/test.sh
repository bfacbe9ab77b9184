#!/usr/bin/env bash
# The Node binding's test command (run by scripts/test): install with `npm ci` (its `prepare`
# step builds libcairn with cargo and the TypeScript with tsc), type-check the examples and the
# typings, then run the node --test suites. Fails when a test fails or when no test ran.
set -euo pipefail
cd "$(dirname "$0")"
# A workspace opened with no store keeps it in Cairn's data directory: a temporary one here,
# never the home of whoever runs the tests.
if [ -z "${CAIRN_HOME:-}" ]; then
  CAIRN_HOME=$(mktemp -d -t cairn-test-home-XXXXXX)
  export CAIRN_HOME
  trap 'rm -rf "$CAIRN_HOME"' EXIT
fi
npm ci --no-audit --no-fund
npm run --silent typecheck
# Test trees go to tmpfs when there is one: thousands of small files are slow on a busy disk.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi
node scripts/run-tests.cjs
