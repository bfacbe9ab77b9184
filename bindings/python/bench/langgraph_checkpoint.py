#!/usr/bin/env python3
"""The cost of one LangGraph checkpoint with CairnSaver (its files snapshotted, with and without a
watcher), beside LangGraph's own SqliteSaver alone (issue 60). Not part of scripts/test.

A graph of one node that loops STEPS times, each step editing one file of a workspace of FILES
files, runs with durability="sync" (each checkpoint saved before the next step). Printed, per
saver: the median over RUNS runs of the wall time per graph checkpoint (the whole step: node,
LangGraph, saver) and the median time of one ``put`` (the saver alone).

    bindings/python/test.sh -q -k langgraph      # makes target/python-venv with cairn
    target/python-venv/bin/pip install langgraph-checkpoint-sqlite==3.1.2
    target/python-venv/bin/python bindings/python/bench/langgraph_checkpoint.py [FILES] [STEPS] [RUNS]
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

import cairn
from cairn.langgraph import CairnSaver

try:
    from langgraph.checkpoint.sqlite import SqliteSaver
except ImportError:
    sys.exit("needs LangGraph's SQLite saver: target/python-venv/bin/pip install langgraph-checkpoint-sqlite==3.1.2")


class State(TypedDict):
    n: int


def make_tree(root: Path, files: int, size: int = 4096, dirs: int = 40) -> None:
    blob = os.urandom(size)
    for i in range(files):
        d = root / "src" / f"d{i % dirs:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_bytes(blob[: size - 8] + i.to_bytes(8, "little"))


def graph(root: Path, steps: int, checkpointer: Any) -> Any:
    def step(state: State) -> State:
        (root / "src" / "d000" / f"edit{state['n'] % 7}.txt").write_text(f"step {state['n']}\n")
        return {"n": state["n"] + 1}

    g = StateGraph(State)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < steps else END)
    return g.compile(checkpointer=checkpointer)


def timed_puts(saver: Any) -> list[float]:
    """Wraps the saver's put to record how long each call takes."""
    took: list[float] = []
    put = saver.put

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return put(*args, **kwargs)
        finally:
            took.append(time.perf_counter() - t)

    saver.put = wrapper
    return took


def measure(name: str, make: Callable[[], Any], root: Path, steps: int, runs: int) -> tuple[str, float, float]:
    per_checkpoint, puts = [], []
    with make() as saver:
        took = timed_puts(saver)
        g = graph(root, steps, saver)
        g.invoke({"n": 0}, {"configurable": {"thread_id": "warm-up"}}, durability="sync")
        for run in range(runs):
            took.clear()
            t = time.perf_counter()
            g.invoke({"n": 0}, {"configurable": {"thread_id": f"{name}-{run}"}}, durability="sync")
            per_checkpoint.append((time.perf_counter() - t) / len(took))
            puts.extend(took)
    return name, statistics.median(per_checkpoint), statistics.median(puts)


@contextmanager
def sqlite_saver(path: Path) -> Iterator[Any]:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@contextmanager
def cairn_saver(root: Path, store: Path, *, files: bool, watch: bool) -> Iterator[CairnSaver]:
    with cairn.Workspace(root, store=store) as ws, CairnSaver(ws, files=files) as saver:
        if watch:
            ws.watch()
        yield saver


def main() -> None:
    files, steps, runs = (int(a) for a in (sys.argv[1:] + ["2000", "20", "5"][len(sys.argv) - 1 :])[:3])
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        os.environ["CAIRN_HOME"] = str(base / "home")
        root = base / "root"
        make_tree(root, files)
        rows = [
            measure("SqliteSaver (LangGraph, no files)", lambda: sqlite_saver(base / "lg.sqlite"), root, steps, runs),
            measure(
                "CairnSaver files=False",
                lambda: cairn_saver(root, base / "s1", files=False, watch=False),
                root,
                steps,
                runs,
            ),
            measure(
                "CairnSaver, snapshot (no watcher)",
                lambda: cairn_saver(root, base / "s2", files=True, watch=False),
                root,
                steps,
                runs,
            ),
            measure(
                "CairnSaver, snapshot + watcher",
                lambda: cairn_saver(root, base / "s3", files=True, watch=True),
                root,
                steps,
                runs,
            ),
        ]
    print(f"LangGraph checkpoint cost: {files} files of 4 KiB, {steps} steps a run, median of {runs} runs")
    print(f"{'saver':38} {'per checkpoint':>15} {'put alone':>12}")
    for name, per, put in rows:
        print(f"{name:38} {per * 1000:12.2f} ms {put * 1000:9.2f} ms")


if __name__ == "__main__":
    main()
