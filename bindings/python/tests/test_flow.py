"""The whole flow through the idiomatic layer: open, snapshot, list, show, diff, plan, apply,
restore and undo, verify, copy, gc, prune, delete, recover, holds."""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing
from pathlib import Path

import pytest
from conftest import write

import cairn


def test_the_whole_flow(root: Path, tmp_path: Path):
    with cairn.Workspace(root, store=tmp_path / "store") as ws:
        info = ws.info()
        assert info.root == str(root.resolve())
        assert info.store == str(tmp_path / "store")
        assert info.recovered == []

        first = ws.snapshot("first", metadata={"turn": 1})
        assert isinstance(first, cairn.SnapshotInfo)
        assert len(first.id) == 64 and first.label == "first"
        assert first.metadata == {"turn": 1}
        assert isinstance(first.stats, cairn.Stats)
        assert first.stats.files == 2 and first.stats.hashed == 2
        assert first.workspace_id == info.id
        assert abs(first.created - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=5)

        # Edit: change one file, add one, delete one.
        write(root, "src/main.py", "print('edited')\n")
        write(root, "notes.txt", "new\n")
        (root / "README.md").unlink()
        changes = {c.path: c for c in ws.diff(first)}
        assert {p: c.kind for p, c in changes.items()} == {
            "src/main.py": "modified",
            "notes.txt": "added",
            "README.md": "deleted",
        }
        assert changes["notes.txt"].old is None and changes["notes.txt"].new.kind == "file"
        assert changes["README.md"].new is None and changes["README.md"].old.size == len("# project\n")

        second = ws.snapshot("second")
        assert [s.id for s in ws.list()] == [first.id, second.id]
        assert ws.show("second").id == second.id
        assert ws.show(second.id[:8]).id == second.id
        assert {c.path for c in ws.diff("first", "second")} == set(changes)

        # Plan (the dry run changes nothing), then apply it exactly.
        plan = ws.plan(first)
        assert isinstance(plan, cairn.RestorePlan)
        assert plan.snapshot_id == first.id
        assert sorted(plan.restored) == ["README.md", "src/main.py"]
        assert plan.deleted == ["notes.txt"]
        assert {a.op for a in plan.actions} == {"write_file", "remove_file"}
        assert (root / "notes.txt").exists()
        report = ws.apply(plan)
        assert isinstance(report, cairn.RestoreReport)
        assert report.as_planned and not report.dry_run
        assert report.operations == len(plan.actions)
        assert (root / "src/main.py").read_text() == "print('hello')\n"
        assert (root / "README.md").read_text() == "# project\n"
        assert not (root / "notes.txt").exists()
        assert ws.diff(first) == []

        # Undo through the safety snapshot.
        undo = ws.restore(report.safety_snapshot_id)
        assert (root / "notes.txt").read_text() == "new\n"
        assert undo.safety_snapshot_id is not None

        # A dry-run restore lists and changes nothing.
        dry = ws.restore("first", dry_run=True)
        assert dry.dry_run and dry.operations == 0 and "notes.txt" in dry.deleted
        assert (root / "notes.txt").exists()

        # Upkeep.
        verify = ws.verify()
        assert isinstance(verify, cairn.VerifyReport)
        assert verify.ok and verify.bad_copies == [] and all(s.ok for s in verify.snapshots)
        gc_plan = ws.gc(dry_run=True)
        assert gc_plan.dry_run and gc_plan.plan.snapshots == len(ws.list())
        gc = ws.gc(grace=0)
        assert isinstance(gc, cairn.GcReport) and not gc.dry_run

        (tmp_path / "other-root").mkdir()
        with cairn.Workspace(tmp_path / "other-root", store=tmp_path / "other-store") as other:
            copied = ws.copy(first, other)
            assert copied.snapshot == first.id and copied.objects_copied > 0
            assert ws.copy(first, other).already_present
            other.restore(first.id)
            assert (tmp_path / "other-root/src/main.py").read_text() == "print('hello')\n"

        count = len(ws.list())
        deleted = ws.delete("second")
        assert isinstance(deleted, cairn.PruneReport)
        assert deleted.deleted == [second.id] and deleted.kept == count - 1
        with pytest.raises(cairn.NotFoundError):
            ws.show("second")

        protected = ws.snapshot("keep me", protect=True)
        assert protected.protected
        pruned = ws.prune(count=1)
        remaining = {s.id for s in ws.list()}
        assert protected.id in remaining
        assert set(pruned.deleted).isdisjoint(remaining)
        assert ws.prune(cairn.Retention(max_age=dt.timedelta(days=365))).deleted == []
        with pytest.raises(TypeError):
            ws.prune(cairn.Retention(count=1), count=2)

        assert ws.recover() == []
        assert ws.give_up() == []


def test_snapshot_kept_and_skipped_are_reported(ws, root):
    write(root, ".git/HEAD", "ref: refs/heads/main\n")
    write(root, "big.bin", b"x" * 4096)
    snap = ws.snapshot(max_file_bytes=1024)
    assert cairn.KeptPath(".git", "default", True) in snap.kept
    assert snap.skipped == [cairn.Skipped("big.bin", "too-large", False)]
    assert ws.show(snap.id).skipped == snap.skipped
    assert ws.show(snap.id).kept == []  # only the snapshot call reports the walk's kept paths


def test_excludes_from_the_workspace_and_the_call(root, tmp_path):
    write(root, "build/out.o", "obj")
    write(root, "tmp.log", "log")
    with cairn.Workspace(root, store=tmp_path / "store", excludes=["build"]) as ws:
        snap = ws.snapshot(excludes=["*.log"])
        assert snap.stats.files == 2
        assert set(snap.excludes) == {"build", "*.log"}


def test_restore_with_an_idempotency_key_returns_the_earlier_report(ws, root):
    snap = ws.snapshot()
    write(root, "README.md", "changed")
    one = ws.restore(snap, key="turn-7")
    write(root, "README.md", "changed again")
    two = ws.restore(snap, key="turn-7")
    # The same report, less how the first call walked: the repeat walked nothing.
    assert one.safety_walk is not None and two.safety_walk is None
    assert dataclasses.replace(one, safety_walk=None) == two
    assert (root / "README.md").read_text() == "changed again"


def test_apply_refuses_what_is_not_a_plan(ws):
    with pytest.raises(TypeError):
        ws.apply("not a plan")  # type: ignore[arg-type]


def test_a_hold_is_a_context_manager_and_can_be_released_early(ws, root):
    snap = ws.snapshot()
    hold = ws.hold("agent run", pid=None)
    assert "held" in repr(hold)
    with pytest.raises(cairn.BusyError):
        ws.restore(snap)
    hold.release()
    hold.release()  # idempotent
    assert "released" in repr(hold)
    ws.restore(snap)
    with ws.hold("second"):
        assert ws.restore(snap, dry_run=True).busy


def test_gil_free_calls_work_under_asyncio_to_thread(ws):
    import asyncio

    async def main():
        return await asyncio.gather(*(asyncio.to_thread(ws.snapshot, f"s{i}") for i in range(3)))

    snaps = asyncio.run(main())
    assert sorted(s.label for s in snaps) == ["s0", "s1", "s2"]


def test_results_are_typed_dataclasses():
    import dataclasses

    for cls in (cairn.SnapshotInfo, cairn.Stats, cairn.RestorePlan, cairn.RestoreReport, cairn.Change, cairn.VerifyReport, cairn.GcReport, cairn.PruneReport):
        assert dataclasses.is_dataclass(cls)
        hints = typing.get_type_hints(cls)
        assert hints and all(h is not typing.Any for h in hints.values())
