"""Names that are not UTF-8 round-trip exactly: out as os.fsdecode strings, back in through
os.fsencode."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import write

import cairn
from cairn.types import decode_path

LATIN1 = b"caf\xe9.txt"  # not UTF-8
NAME = os.fsdecode(LATIN1)  # "caf\udce9.txt"


def test_json_paths_decode_like_os_fsdecode():
    assert decode_path("src/main.py") == "src/main.py"
    assert decode_path("caf\u00e9.txt") == "caf\u00e9.txt"
    assert decode_path({"hex": LATIN1.hex()}) == NAME
    assert os.fsencode(decode_path({"hex": LATIN1.hex()})) == LATIN1


def test_a_non_utf8_name_round_trips_through_snapshot_diff_and_restore(ws, root):
    write(root, LATIN1, "latin-1 name\n")
    assert NAME in os.listdir(root)

    # skipped: a snapshot too small to keep it names it exactly.
    small = ws.snapshot(max_file_bytes=4)
    skipped = {s.path for s in small.skipped}
    assert NAME in skipped
    assert os.fsencode(NAME) == LATIN1

    snap = ws.snapshot("with the name")
    assert snap.skipped == []

    # diff: edited, then deleted.
    write(root, LATIN1, "edited\n")
    assert [(c.path, c.kind) for c in ws.diff(snap)] == [(NAME, "modified")]
    os.remove(os.path.join(os.fsencode(root), LATIN1))
    assert [(c.path, c.kind) for c in ws.diff(snap)] == [(NAME, "deleted")]

    # plan and restore report it, and the file comes back under its exact bytes.
    plan = ws.plan(snap)
    assert NAME in plan.restored
    assert any(a.path == NAME for a in plan.actions)
    report = ws.restore(snap)
    assert NAME in report.restored
    assert LATIN1 in os.listdir(os.fsencode(root))
    assert Path(root, NAME).read_text() == "latin-1 name\n"

    # ... and a restore that deletes it.
    write(root, b"\xff\xfe-junk", "junk")
    report = ws.restore(snap)
    assert os.fsdecode(b"\xff\xfe-junk") in report.deleted
    assert b"\xff\xfe-junk" not in os.listdir(os.fsencode(root))


def test_a_workspace_root_that_is_not_utf8(tmp_path):
    root = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"r\xe9pertoire")))
    write(root, "a.txt", "a")
    with cairn.Workspace(os.fsencode(root), store=tmp_path / "store") as ws:
        assert ws.info().root == str(root)
        snap = ws.snapshot()
        (root / "a.txt").write_text("b")
        ws.restore(snap)
        assert (root / "a.txt").read_text() == "a"
    with cairn.Workspace(root, store=tmp_path / "store") as ws:  # the same, given as str
        assert ws.show(snap.id).id == snap.id


def test_kept_paths_that_are_not_utf8(ws, root):
    write(root, b"node_modules/m\xe9/index.js", "x")
    write(root, LATIN1 + b".log", "log")
    snap = ws.snapshot(excludes=["*.log"])
    kept = {k.path: k.reason for k in snap.kept}
    assert kept["node_modules"] == "default"
    assert kept[os.fsdecode(LATIN1 + b".log")] == "glob"
