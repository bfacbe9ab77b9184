#!/usr/bin/env bash
# Installs the cairn package into a venv under target/ and runs its pytest suite.
# Usage: bindings/python/test.sh [pytest args...]. Called by scripts/test.
#
# Works on a fresh machine: it needs python3 (with venv), cargo, and access to PyPI for cffi,
# pytest and the pinned langgraph packages the first time. Nothing is installed outside
# target/python-venv.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$ROOT/target/python-venv"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import sys" 2>/dev/null; then
  echo "== Python: creating $VENV"
  rm -rf "$VENV"
  if ! "$PY" -m venv "$VENV"; then
    echo "bindings/python: '$PY -m venv' failed; on Debian install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  fi
fi
VPY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== Python: pip install ./bindings/python (builds libcairn with cargo) and pytest"
"$VPY" -m pip install --quiet "cffi>=1.17" "pytest>=7"
# The langgraph extra, pinned, and LangGraph's conformance suite (tests/test_langgraph.py).
"$VPY" -m pip install --quiet --no-compile "langgraph==1.2.22" "langgraph-checkpoint==4.3.2" \
  "langgraph-checkpoint-conformance==0.0.2"
# --force-reinstall: the same version number must still pick up a rebuilt library. With
# CAIRN_LIBRARY set (scripts/test sets the dev profile's), that library is bundled instead of
# a release build; pytest runs without it, so the package loads the library it bundles.
"$VPY" -m pip install --quiet --no-deps --force-reinstall "$HERE"
unset CAIRN_LIBRARY

echo "== Python: pytest"
cd "$HERE"
# pytest's temporary directories live under the run's own directory, removed at the end
# (by default they stay in /tmp/pytest-of-$USER).
BASETEMP=$(mktemp -d -t cairn-pytest-XXXXXX)
trap 'rm -rf "$BASETEMP"' EXIT
set +e
"$VPY" -m pytest -q -p no:cacheprovider --basetemp="$BASETEMP/t" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "bindings/python: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$rc"
