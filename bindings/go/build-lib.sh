#!/usr/bin/env bash
# Builds libcairn.a (release profile unless CAIRN_PROFILE names another; panic = "unwind")
# and copies it, with the header it was built with, where the cgo directives of ffi.go look
# for them:
#   bindings/go/lib/<GOOS>-<GOARCH>/libcairn.a
#   bindings/go/include/cairn.h
# Both are build outputs (git-ignored). Run it after changing crates/ffi; `go test ./...` in
# bindings/go needs nothing else. Files are replaced only when their content changed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

# CAIRN_PROFILE: the Cargo profile (default release; scripts/test builds dev, see there).
profile=${CAIRN_PROFILE:-release}
case "$profile" in
  dev) dir=debug ;;
  *) dir=$profile ;;
esac
cargo build --quiet --profile "$profile" -p cairn-ffi
# Where cargo put it (CARGO_TARGET_DIR or a cargo config may move target/).
target="$(cargo metadata --format-version 1 --no-deps | grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)"

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
dest="$here/lib/$goos-$goarch"
mkdir -p "$dest" "$here/include"

# Copies $1 to $2 unless $2 already has the same bytes (so the Go build cache stays warm).
install_if_changed() {
  if ! cmp -s "$1" "$2"; then
    cp "$1" "$2.tmp"
    mv "$2.tmp" "$2"
    echo "build-lib.sh: updated ${2#"$repo"/}"
  fi
}
install_if_changed "$target/$dir/libcairn.a" "$dest/libcairn.a"
install_if_changed include/cairn.h "$here/include/cairn.h"
