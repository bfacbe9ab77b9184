"""A watcher inside the process: ``Workspace.watch`` and ``unwatch``, and what each snapshot
says it walked (``walk``). The watcher's events are read when a snapshot asks for them, so no
test waits for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write

import cairn
from cairn._ffi import lib
from cairn._handle import call_json


def test_a_watched_workspace_snapshots_only_the_directories_that_changed(ws: cairn.Workspace, root: Path):
    status = ws.watch()
    assert isinstance(status, cairn.WatchStatus)
    assert status.root == str(root.resolve())
    assert status.watches >= 2  # the root and src/
    assert status.unwatched == [] and not status.gone and status.overflows == 0

    first = ws.snapshot("first")
    assert isinstance(first.walk, cairn.WalkInfo)
    # The first snapshot with this watcher has no earlier one to count from: it walks it all.
    assert first.walk.walked == "full" and first.walk.reason, first.walk

    write(root, "src/main.py", "print('changed while watched')\n")
    second = ws.snapshot("second")
    assert second.walk.walked == "partial", second.walk
    # src, listed whole or looked at by the name its event gave.
    assert second.walk.listed + second.walk.named >= 1, second.walk
    changes = ws.diff(first, second)
    assert [(c.path, c.kind) for c in changes] == [("src/main.py", "modified")]
    assert changes[0].new is not None and changes[0].new.size == len("print('changed while watched')\n")

    third = ws.snapshot("third")
    assert third.walk.walked != "full", third.walk
    assert third.root == second.root and ws.diff(second, third) == []

    # list() and show() know nothing of walks.
    assert ws.show("third").walk is None

    ws.unwatch()
    ws.unwatch()  # none runs: nothing to do
    # Without the watcher every snapshot walks it all, and finds what the watched ones found.
    full = ws.snapshot("full")
    assert full.walk.walked == "full" and full.walk.reason is None, full.walk
    assert full.root == third.root

    write(root, "src/main.py", "print('changed after unwatch')\n")
    after = ws.snapshot("after")
    assert after.walk.walked == "full" and after.walk.reason is None, after.walk
    assert [(c.path, c.kind) for c in ws.diff(full, after)] == [("src/main.py", "modified")]


def test_unknown_watch_options_are_refused_with_invalid_argument(ws: cairn.Workspace):
    with pytest.raises(cairn.InvalidArgumentError):
        ws.watch(max_watches=-1)
    # An option the library does not know, sent through the thin layer (watch() cannot).
    doc = b'{"max_watch": 10}'
    with ws._use() as ptr, pytest.raises(cairn.InvalidArgumentError, match="max_watch"):
        call_json(lib.cairn_workspace_watch, ptr, doc, len(doc))
    # Nothing was started: snapshots walk as before.
    snap = ws.snapshot()
    assert snap.walk is not None and snap.walk.walked == "full" and snap.walk.reason is None


def test_max_watches_leaves_the_directories_past_it_unwatched(ws: cairn.Workspace, root: Path):
    write(root, "a/b/c.txt", "c")
    status = ws.watch(max_watches=1)
    assert status.watches == 1  # the root
    assert sorted(u.split(":")[0] for u in status.unwatched) == ["a", "src"], status
    ws.snapshot()
    write(root, "a/b/c.txt", "changed")
    snap = ws.snapshot()
    # The unwatched subtree is walked by every snapshot, and the walk says so.
    assert snap.walk.walked == "partial" and snap.walk.reason, snap.walk
    assert [c.path for c in ws.diff(ws.list()[-2], snap)] == ["a/b/c.txt"]


def test_a_closed_workspace_refuses_watch_and_unwatch(root: Path, tmp_path: Path):
    w = cairn.Workspace(root, store=tmp_path / "store")
    w.watch()
    w.close()  # stops the watcher with the handle
    with pytest.raises(cairn.ClosedError):
        w.watch()
    with pytest.raises(cairn.ClosedError):
        w.unwatch()


def test_a_root_whose_name_is_not_utf8_can_be_watched(tmp_path: Path):
    # Its status names the root as text (U+FFFD for the byte that is not UTF-8); it used to
    # fail to write the status, after the watcher had started.
    import os

    root = os.path.join(os.fsencode(tmp_path), b"r\xe9pertoire")
    os.mkdir(root)
    os.mkdir(os.path.join(root, b"src"))
    with open(os.path.join(root, b"src", b"a.txt"), "w") as f:
        f.write("a\n")
    with cairn.Workspace(root, store=tmp_path / "store") as w:
        status = w.watch()
        assert status.root.endswith("r\ufffdpertoire") and status.watches == 2
        first = w.snapshot("first")
        with open(os.path.join(root, b"src", b"a.txt"), "w") as f:
            f.write("b\n")
        second = w.snapshot("second")
        assert second.walk.walked == "partial", second.walk
        assert [c.path for c in w.diff(first, second)] == ["src/a.txt"]
