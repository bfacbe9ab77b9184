"""cairn.langgraph: LangGraph's checkpoint saver with the workspace's files (issue 60).

LangGraph's own conformance suite (langgraph-checkpoint-conformance, pinned in test.sh) runs
against CairnSaver; then a real graph whose nodes edit files is replayed from an earlier
checkpoint with its files, and forked with copy_thread into another workspace."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest
from conftest import write

import cairn

pytest.importorskip("langgraph.graph", reason="the langgraph extra is not installed")

from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

from cairn.langgraph import CairnSaver, NoFilesError  # noqa: E402

# Capabilities of the conformance suite left out, with why: none. Cairn's journal is
# append-only, so deletions (delete_thread, delete_for_runs, prune) hide checkpoints from the
# saver and give their snapshots back; the suite checks what a saver shows, which they keep.
SKIPPED: dict[str, str] = {}


def conformance(tmp_path: Path, threads_db: str | None = None) -> None:
    """Runs the pinned conformance suite against a fresh saver per capability."""
    made = itertools.count()

    @checkpointer_test(name="CairnSaver", skip_capabilities=set(SKIPPED))
    async def cairn_saver():
        d = tmp_path / f"s{next(made)}"
        (d / "root").mkdir(parents=True)
        with cairn.Workspace(d / "root", store=d / "store") as ws, CairnSaver(ws, threads_db=threads_db) as saver:
            yield saver

    report = asyncio.run(validate(cairn_saver))
    report.print_report()
    failures = {name: r.failures for name, r in report.results.items() if r.passed is False}
    assert failures == {}
    passed = {name for name, r in report.results.items() if r.passed}
    assert passed == {c.value for c in ALL_CAPABILITIES} - set(SKIPPED)


def test_the_saver_passes_langgraphs_conformance_suite_in_every_capability(tmp_path):
    # Issue 60: every base and extended capability of the pinned suite passes.
    conformance(tmp_path)


def test_the_saver_passes_the_conformance_suite_on_a_postgres_thread_database(tmp_path):
    # Issue 60: the graph checkpoints of a fleet, in its PostgreSQL thread database.
    url = os.environ.get("CAIRN_TEST_PG_URL")
    if not url:
        pytest.skip("CAIRN_TEST_PG_URL is not set (scripts/test starts a PostgreSQL server and sets it)")
    conformance(tmp_path, threads_db=url)


class State(TypedDict):
    log: list[str]


def file_graph(root: Path) -> StateGraph:
    """A graph with no model: each node edits files in the workspace."""

    def draft(state: State) -> State:
        write(root, "notes.md", "draft\n")
        return {"log": [*state["log"], "draft"]}

    def revise(state: State) -> State:
        write(root, "notes.md", "revised\n")
        write(root, "extra.txt", "added by revise\n")
        return {"log": [*state["log"], "revise"]}

    def finish(state: State) -> State:
        (root / "README.md").unlink()
        return {"log": [*state["log"], "finish"]}

    g = StateGraph(State)
    g.add_node("draft", draft)
    g.add_node("revise", revise)
    g.add_node("finish", finish)
    g.add_edge(START, "draft")
    g.add_edge("draft", "revise")
    g.add_edge("revise", "finish")
    g.add_edge("finish", END)
    return g


def checkpoint_before(graph, config, node: str):
    """The state snapshot whose next node is ``node``."""
    return next(s for s in graph.get_state_history(config) if s.next == (node,))


def test_a_graph_replayed_from_an_earlier_checkpoint_finds_the_files_of_that_point(ws, root):
    # Issue 60: replaying (time travel) puts the files back as they were at the checkpoint.
    with CairnSaver(ws) as saver:
        graph = file_graph(root).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t1"}}
        out = graph.invoke({"log": []}, config, durability="sync")
        assert out["log"] == ["draft", "revise", "finish"]
        assert not (root / "README.md").exists() and (root / "extra.txt").exists()

        earlier = checkpoint_before(graph, config, "revise")
        assert earlier.values["log"] == ["draft"]
        first_run = {t.checkpoint["id"] for t in saver.list(config)}

        # A dry run lists what would change and changes nothing.
        dry = saver.restore_files(earlier.config, dry_run=True)
        assert dry.dry_run and dry.files is not None and dry.files.restore is not None
        assert "extra.txt" in dry.files.restore.deleted and "README.md" in dry.files.restore.restored
        assert not (root / "README.md").exists()

        # Someone else's edit since the newest checkpoint is drift: refused on request.
        write(root, "notes.md", "edited by hand\n")
        with pytest.raises(cairn.ConflictError):
            saver.restore_files(earlier.config, on_drift="refuse")
        assert (root / "notes.md").read_text() == "edited by hand\n"

        report = saver.restore_files(earlier.config, on_drift="overwrite")
        assert (root / "notes.md").read_text() == "draft\n"
        assert (root / "README.md").read_text() == "# project\n"
        assert not (root / "extra.txt").exists()
        assert report.files is not None and report.files.safety_snapshot_id is not None

        # The graph replays from there, and its nodes find the files of that point.
        out = graph.invoke(None, earlier.config, durability="sync")
        assert out["log"] == ["draft", "revise", "finish"]
        assert (root / "notes.md").read_text() == "revised\n" and not (root / "README.md").exists()
        # The replay is a new branch of the graph's history: the first run's checkpoints stay.
        after = {t.checkpoint["id"] for t in saver.list(config)}
        assert first_run < after

        # The safety snapshot undoes the restore: the hand edit comes back.
        ws.restore(report.files.safety_snapshot_id)
        assert (root / "notes.md").read_text() == "edited by hand\n"


def test_copy_thread_forks_the_graph_with_its_files_into_another_workspace(ws, root, tmp_path):
    # Issue 60: copy_thread is Cairn's fork; with a workspace it takes the files along.
    other_root = tmp_path / "other"
    other_root.mkdir()
    with CairnSaver(ws) as saver, cairn.Workspace(other_root, store=tmp_path / "other-store") as other:
        graph = file_graph(root).compile(checkpointer=saver)
        graph.invoke({"log": []}, {"configurable": {"thread_id": "src"}}, durability="sync")

        saver.copy_thread("src", "dst", workspace=other)
        assert (other_root / "notes.md").read_text() == "revised\n"
        assert (other_root / "extra.txt").exists() and not (other_root / "README.md").exists()

        # A saver on the other workspace, same thread database, goes on with the fork.
        with CairnSaver(other, threads_db=saver.threads_db) as there:
            forked = file_graph(other_root).compile(checkpointer=there)
            dst = {"configurable": {"thread_id": "dst"}}
            assert forked.get_state(dst).values["log"] == ["draft", "revise", "finish"]
            src_ids = [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "src"}})]
            assert [t.checkpoint["id"] for t in there.list(dst)] == src_ids

            # Deleting the source keeps what the fork's checkpoints need: the fork still
            # restores its earlier files, into its own workspace only.
            saver.delete_thread("src")
            assert saver.get_tuple({"configurable": {"thread_id": "src"}}) is None
            earlier = checkpoint_before(forked, dst, "revise")
            there.restore_files(earlier.config)
            assert (other_root / "notes.md").read_text() == "draft\n"
            assert (other_root / "README.md").exists() and not (other_root / "extra.txt").exists()
            assert (root / "notes.md").read_text() == "revised\n"


def test_deleting_a_thread_gives_its_snapshots_back_unless_a_copy_needs_them(ws, root):
    # Issue 60: delete_thread and prune follow Cairn's collection, never taking what a
    # checkpoint still shown by another thread needs.
    with CairnSaver(ws) as saver:
        graph = file_graph(root).compile(checkpointer=saver)
        graph.invoke({"log": []}, {"configurable": {"thread_id": "a"}}, durability="sync")
        taken = {t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "a"}})}
        assert len(taken) == 5
        before = {s.id for s in ws.list()}

        saver.copy_thread("a", "b")
        saver.prune(["a"], strategy="keep_latest")
        saver.delete_thread("a")
        assert {s.id for s in ws.list()} == before  # "b" shares every snapshot
        saver.delete_thread("b")
        assert {s.id for s in ws.list()} < before
        assert list(saver.list(None)) == []


def test_a_checkpoint_saved_without_files_cannot_restore_files(ws, root):
    # Issue 60: files=False is a plain checkpointer; restore_files says why it cannot.
    with CairnSaver(ws, files=False) as saver:
        graph = file_graph(root).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "plain"}}
        graph.invoke({"log": []}, config)
        assert ws.list() == []
        with pytest.raises(NoFilesError):
            saver.restore_files(config)


def test_the_async_api_runs_a_graph_and_restores_its_files(ws, root):
    # Issue 60: ainvoke goes through the saver's async methods; arestore_files too.
    with CairnSaver(ws) as saver:
        graph = file_graph(root).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "async"}}

        async def run():
            await graph.ainvoke({"log": []}, config, durability="sync")
            history = [s async for s in graph.aget_state_history(config)]
            earlier = next(s for s in history if s.next == ("finish",))
            await saver.arestore_files(earlier.config)

        asyncio.run(run())
        assert (root / "README.md").exists() and (root / "extra.txt").exists()


def test_a_repeated_write_keeps_the_first_value_except_on_special_channels(ws):
    # Issue 60: as LangGraph's SQL savers (INSERT OR IGNORE, INSERT OR REPLACE for ERROR &c.).
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.serde.types import ERROR

    with CairnSaver(ws, files=False) as saver:
        stored = saver.put({"configurable": {"thread_id": "w", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})
        saver.put_writes(stored, [("ch", "first")], "task")
        saver.put_writes(stored, [("ch", "second")], "task")
        saver.put_writes(stored, [(ERROR, "old error")], "task")
        saver.put_writes(stored, [(ERROR, "new error")], "task")
        assert saver.get_tuple(stored).pending_writes == [("task", ERROR, "new error"), ("task", "ch", "first")]


def test_the_langgraph_example_runs_replays_with_files_and_forks(tmp_path):
    # Issue 60: examples/langgraph_files.py, as a user runs it.
    example = Path(__file__).resolve().parent.parent / "examples" / "langgraph_files.py"
    out = subprocess.run(
        [sys.executable, str(example), str(tmp_path / "demo")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "at the checkpoint:  ['PLAN.md', 'app.py']" in out.stdout
    assert "fork, back at plan: ['PLAN.md'] | original: ['app.py']" in out.stdout
