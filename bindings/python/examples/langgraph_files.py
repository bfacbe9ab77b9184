#!/usr/bin/env python3
"""LangGraph time travel with the files: run a graph, replay it from an earlier checkpoint with
the files of that point, and fork it into another workspace (issue 60).

The graph needs no model: its nodes edit files in the workspace. ``CairnSaver`` keeps the
graph's checkpoints in Cairn's thread database and snapshots the workspace at each one, so
``restore_files`` puts the files back as they were at any checkpoint (dry run first, drift
check, safety snapshot), and ``copy_thread(..., workspace=other)`` forks the graph's history
with its files.

    pip install './bindings/python[langgraph]'
    python3 examples/langgraph_files.py [WORKSPACE_DIR]

Without a directory it works in a temporary one. The store lives outside the workspace.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import cairn
from cairn.langgraph import CairnSaver


class State(TypedDict):
    done: list[str]


def build(root: Path) -> StateGraph:
    """plan -> code -> cleanup, each node editing files under ``root``."""

    def plan(state: State) -> State:
        (root / "PLAN.md").write_text("1. write app.py\n2. drop the plan\n")
        return {"done": [*state["done"], "plan"]}

    def code(state: State) -> State:
        (root / "app.py").write_text("print('hello')\n")
        return {"done": [*state["done"], "code"]}

    def cleanup(state: State) -> State:
        (root / "PLAN.md").unlink()
        return {"done": [*state["done"], "cleanup"]}

    g = StateGraph(State)
    for name, fn in (("plan", plan), ("code", code), ("cleanup", cleanup)):
        g.add_node(name, fn)
    g.add_edge(START, "plan")
    g.add_edge("plan", "code")
    g.add_edge("code", "cleanup")
    g.add_edge("cleanup", END)
    return g


def files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def main(base: Path) -> None:
    root, other_root = base / "project", base / "fork"
    root.mkdir(parents=True, exist_ok=True)
    other_root.mkdir(exist_ok=True)
    with cairn.Workspace(root, store=base / "store") as ws, CairnSaver(ws) as saver:
        graph = build(root).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "demo"}}

        # 1. Run. durability="sync": each checkpoint (and its snapshot) is saved before the
        #    next step starts, so its files are exactly those of that point.
        graph.invoke({"done": []}, config, durability="sync")
        print("after the run:     ", files(root))

        # 2. Replay from the checkpoint before "cleanup", with the files of that point.
        earlier = next(s for s in graph.get_state_history(config) if s.next == ("cleanup",))
        plan = saver.restore_files(earlier.config, dry_run=True)
        print("a restore would put back:", plan.files.restore.restored if plan.files and plan.files.restore else [])
        saver.restore_files(earlier.config, on_drift="refuse")  # nobody else edited: goes through
        print("at the checkpoint: ", files(root), "state:", earlier.values["done"])
        graph.invoke(None, earlier.config, durability="sync")
        print("replayed:          ", files(root))

        # 3. Fork the graph's history with its files into another workspace, and go on there.
        with cairn.Workspace(other_root, store=base / "fork-store") as other:
            saver.copy_thread("demo", "demo-fork", workspace=other)
            print("the fork's files:  ", files(other_root))
            with CairnSaver(other, threads_db=saver.threads_db) as there:
                forked = build(other_root).compile(checkpointer=there)
                fork_config = {"configurable": {"thread_id": "demo-fork"}}
                print("the fork's state:  ", forked.get_state(fork_config).values["done"])
                first = next(s for s in forked.get_state_history(fork_config) if s.next == ("code",))
                there.restore_files(first.config)
                print("fork, back at plan:", files(other_root), "| original:", files(root))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]).resolve())
    else:
        with tempfile.TemporaryDirectory() as d:
            main(Path(d))
