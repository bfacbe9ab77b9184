"""Where checkpoints live when no store is given (issue 19): outside the workspace, in the
data directory, so that wiping the tree (as `git clean -fdx` or `rm -rf` do) loses nothing."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import cairn


def test_a_workspace_opened_without_a_store_keeps_it_in_the_data_directory_and_survives_a_wipe(
    root: Path, cairn_home: Path
) -> None:
    (root / ".git").mkdir()
    (root / "untracked.txt").write_text("work not committed yet\n")
    with cairn.Workspace(root) as ws:
        info = ws.info()
        assert info.store_home == "data"
        assert Path(info.store).parent == cairn_home / "stores"
        assert Path(info.store).name.startswith("root-")
        snap = ws.snapshot(label="before-wipe")
    assert not (root / ".cairn").exists()
    assert stat.S_IMODE(cairn_home.stat().st_mode) == 0o700

    # The agent wipes every entry of the root but .git.
    for p in root.iterdir():
        if p.name != ".git":
            shutil.rmtree(p) if p.is_dir() else p.unlink()

    with cairn.Workspace(root) as ws:
        assert [s.id for s in ws.list()] == [snap.id]
        ws.restore("before-wipe")
    assert (root / "untracked.txt").read_text() == "work not committed yet\n"
    assert (root / "README.md").read_text() == "# project\n"


def test_two_workspaces_without_a_store_never_see_each_others_snapshots(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_text("a\n")
    (b / "f").write_text("b\n")
    with cairn.Workspace(a) as wa, cairn.Workspace(b) as wb:
        sa = wa.snapshot(label="a")
        assert wb.list() == []
        assert wa.info().store != wb.info().store
        assert [s.id for s in wa.list()] == [sa.id]
