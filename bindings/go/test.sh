#!/usr/bin/env bash
# The Go binding's tests: builds libcairn.a (build-lib.sh), then go vet, go test, go test
# -race, and go test with GOGC=1 (a collection at nearly every allocation, so a handle freed
# too early or a Go pointer kept by C shows up). Called by scripts/test.
set -euo pipefail
cd "$(dirname "$0")"
# A workspace opened with no store keeps it in Cairn's data directory: a temporary one here,
# never the home of whoever runs the tests.
if [ -z "${CAIRN_HOME:-}" ]; then
  CAIRN_HOME=$(mktemp -d -t cairn-test-home-XXXXXX)
  export CAIRN_HOME
  made_home=1
fi
# Go's build cache under target/ (as npm's), and its temporary files (cgo's compiler probes,
# `cgo-gcc-input-*`, which it leaves behind) in a directory removed at the end (issue 61).
GOCACHE="$(cd ../.. && pwd)/target/go-cache"
go_tmp=$(mktemp -d -t cairn-go-tmp-XXXXXX)
trap 'rm -rf "$go_tmp" ${made_home:+"$CAIRN_HOME"}' EXIT
export GOCACHE TMPDIR="$go_tmp"
# The panic test makes the library print its (caught) panic; a backtrace would only add noise.
export RUST_BACKTRACE=0
export CGO_ENABLED=1

echo "== Go: build libcairn.a for the binding"
./build-lib.sh

echo "== Go: go vet"
go vet ./...

# -count=1: results are never taken from the test cache (it does not see libcairn.a change,
# nor GOGC).
echo "== Go: go test"
go test -count=1 ./...

echo "== Go: go test -race"
go test -count=1 -race ./...

echo "== Go: GOGC=1 go test"
GOGC=1 go test -count=1 ./...
