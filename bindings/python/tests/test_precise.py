"""Precise restores (issue 31): chosen paths only, and files someone else edited since the
checkpoint being left refused, kept or overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write

import cairn


def _seen(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root: its content and mtime (ns)."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_a_restore_of_chosen_paths_touches_nothing_else_and_its_safety_snapshot_undoes_it(ws, root):
    write(root, "a/one.txt", "one")
    write(root, "b/two.txt", "two")
    base = ws.snapshot()
    write(root, "a/one.txt", "one, edited")
    write(root, "a/new.txt", "new")
    write(root, "b/two.txt", "two, edited")
    before = _seen(root)

    plan = ws.plan(base, paths=["a"])
    assert plan.paths == ["a"] and sorted(plan.restored + plan.deleted) == ["a/new.txt", "a/one.txt"]
    report = ws.apply(plan)
    assert report.paths == ["a"]
    after = _seen(root)
    assert (root / "a/one.txt").read_text() == "one" and not (root / "a/new.txt").exists()
    outside = {p: s for p, s in before.items() if not p.startswith("a/")}
    assert {p: s for p, s in after.items() if not p.startswith("a/")} == outside

    undo = ws.restore(report.safety_snapshot_id, paths=["a"])
    assert undo.paths == ["a"]
    assert (root / "a/one.txt").read_text() == "one, edited" and (root / "a/new.txt").read_text() == "new"
    assert {p: s for p, s in _seen(root).items() if not p.startswith("a/")} == outside

    with pytest.raises(cairn.NotFoundError):
        ws.restore(base, paths=["no/such/path"])
    with pytest.raises(cairn.InvalidArgumentError):
        ws.restore(base, paths=["../outside"])


@pytest.fixture
def threads(ws):
    with cairn.Threads(workspace=ws, checkpoints=True) as t:
        yield t


def _drifted(threads, root: Path) -> str:
    """A thread whose first message's checkpoint has a0, b0; the second message checkpoints
    the agent's work; then someone else edits b.txt. Returns the first checkpoint's id."""
    write(root, "a.txt", "a0")
    write(root, "b.txt", "b0")
    threads.create("chat")
    first = threads.append("chat", "user", "one")
    write(root, "a.txt", "a1")
    write(root, "b.txt", "b1")
    threads.append("chat", "user", "two")
    write(root, "b.txt", "by someone else")
    return first.checkpoint.id


def test_a_rewind_with_files_refuses_then_overwrites_what_someone_else_edited(threads, root):
    cp = _drifted(threads, root)
    with pytest.raises(cairn.ConflictError) as info:
        threads.rewind("chat", cp, files=True, memory=False, on_drift="refuse")
    assert info.value.path == str(root.resolve() / "b.txt")
    assert (root / "a.txt").read_text() == "a1"

    over = threads.rewind("chat", cp, files=True, memory=False, on_drift="overwrite")
    assert over.files.restore.drifted == ["b.txt"]
    # Other processes following the log see the restore, with what it did.
    applied = [e for e in threads.events() if e.kind == "restore_applied"]
    assert len(applied) == 1 and applied[0].data["drifted"] == ["b.txt"], applied
    assert applied[0].data["safety_snapshot_id"] == over.files.safety_snapshot_id
    assert (root / "b.txt").read_text() == "b0"
    assert over.files.safety_snapshot_id is not None  # which holds the edit


def test_a_rewind_with_files_keeps_what_someone_else_edited_and_the_next_rewind_still_protects_it(threads, root):
    cp = _drifted(threads, root)
    kept = threads.rewind("chat", cp, files=True, memory=False, on_drift="keep")
    assert kept.files.restore.drifted == ["b.txt"]
    assert (root / "a.txt").read_text() == "a0" and (root / "b.txt").read_text() == "by someone else"
    # The files that rewind left are its target's (a.txt) and the edit it kept (b.txt): the
    # next rewind compares with what the rewind put back, so the kept edit is still someone
    # else's and is refused again, until overwritten on purpose.
    with pytest.raises(cairn.ConflictError) as e:
        threads.rewind("chat", cp, files=True, memory=False, on_drift="refuse")
    assert "b.txt" in str(e.value)
    assert (root / "b.txt").read_text() == "by someone else"
    again = threads.rewind("chat", cp, files=True, memory=False, on_drift="overwrite")
    assert again.files.restore.drifted == ["b.txt"] and (root / "b.txt").read_text() == "b0"


def test_a_rewind_with_files_of_chosen_paths_restores_only_them(threads, root):
    cp = _drifted(threads, root)
    report = threads.rewind("chat", cp, files=True, memory=False, paths=["a.txt"])
    assert report.files.restore.paths == ["a.txt"]
    assert (root / "a.txt").read_text() == "a0" and (root / "b.txt").read_text() == "by someone else"


def test_a_plan_made_with_keep_is_applied_as_planned(ws, root):
    write(root, "a.txt", "a0")
    write(root, "b.txt", "b0")
    first = ws.snapshot()
    write(root, "a.txt", "a1")
    write(root, "b.txt", "b1")
    second = ws.snapshot()
    write(root, "b.txt", "by someone else")
    plan = ws.plan(first, reference=second, on_drift="keep")
    assert plan.drifted == ["b.txt"] and plan.restored == ["a.txt"]
    report = ws.apply(plan)
    assert report.drifted == ["b.txt"]
    assert (root / "a.txt").read_text() == "a0" and (root / "b.txt").read_text() == "by someone else"


def test_a_diff_with_attribution_names_the_tool_call_of_each_change_and_the_bash_call_of_a_shell_command(ws, root):
    import subprocess

    write(root, "a.txt", "a0")
    write(root, "b.txt", "b0")
    write(root, "c.txt", "c0")
    start = ws.snapshot("before the turn")
    # What an agent's hooks record: a checkpoint before each tool call, naming the call.
    ws.snapshot("toolu_1", metadata={"tool_use_id": "toolu_1", "tool_name": "Edit"})
    write(root, "a.txt", "a1")
    ws.snapshot("toolu_2", metadata={"tool_use_id": "toolu_2", "tool_name": "Edit", "agent_id": "agent-7"})
    write(root, "b.txt", "b1")
    ws.snapshot("toolu_3", metadata={"tool_use_id": "toolu_3", "tool_name": "Bash"})
    subprocess.run(["sh", "-c", "echo shell > c.txt && echo made > d.txt"], cwd=root, check=True)

    plain = ws.diff(start)
    assert all(c.attribution is None for c in plain)
    by_path = {c.path: c.attribution for c in ws.diff(start, attribute=True)}
    assert sorted(by_path) == ["a.txt", "b.txt", "c.txt", "d.txt"]
    who = {p: [(a.tool_use_id, a.tool_name, a.agent_id) for a in v] for p, v in by_path.items()}
    assert who == {
        "a.txt": [("toolu_1", "Edit", None)],
        "b.txt": [("toolu_2", "Edit", "agent-7")],
        "c.txt": [("toolu_3", "Bash", None)],
        "d.txt": [("toolu_3", "Bash", None)],
    }
    assert by_path["c.txt"][0].to is None  # the last interval ends at the files now
    # Between two snapshots, the interval of a.txt ends at the next checkpoint.
    end = ws.snapshot("after the turn")
    closed = {c.path: c.attribution for c in ws.diff(start, end, attribute=True)}
    assert closed["a.txt"][0].label == "toolu_1" and closed["a.txt"][0].to is not None
    assert closed["d.txt"][0].to == end.id


def test_restore_before_a_prompt_takes_chosen_paths_and_the_drift_choice(threads, root):
    write(root, "a.txt", "a0")
    write(root, "b.txt", "b0")
    threads.create("chat")
    threads.append("chat", "user", "one")
    second = threads.append("chat", "user", "two")
    write(root, "a.txt", "a1")
    write(root, "b.txt", "b1")
    threads.append("chat", "user", "three")
    write(root, "b.txt", "by someone else")

    with pytest.raises(cairn.ConflictError):
        threads.restore_before("chat", second.entry, files=True, memory=False, on_drift="refuse")
    assert (root / "a.txt").read_text() == "a1"
    only_a = threads.restore_before("chat", second.entry, files=True, memory=False, paths=["a.txt"], on_drift="refuse")
    assert only_a.files.restore.paths == ["a.txt"]
    assert (root / "a.txt").read_text() == "a0" and (root / "b.txt").read_text() == "by someone else"
