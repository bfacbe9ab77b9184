"""Progress callbacks, cancellation from another thread, and the GIL released during calls."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from conftest import BIG_FILES, make_tree

import cairn


class Boom(Exception):
    pass


@pytest.fixture
def big(big_tree: Path, tmp_path: Path):
    """A workspace over the shared big tree, with a fresh (cold) store."""
    with cairn.Workspace(big_tree, store=tmp_path / "store") as w:
        yield w


def test_progress_reports_reach_the_callback_on_the_calling_thread(big):
    seen: list[cairn.Progress] = []
    threads: set[int] = set()

    def progress(p: cairn.Progress) -> None:
        seen.append(p)
        threads.add(threading.get_ident())

    snap = big.snapshot(progress=progress, use_stat_cache=False)
    assert seen, "the callback was never called"
    assert all(isinstance(p, cairn.Progress) for p in seen)
    assert [p.files for p in seen] == sorted(p.files for p in seen)
    assert seen[-1].files == snap.stats.files == BIG_FILES
    assert threads == {threading.get_ident()}


def test_an_exception_raised_in_the_callback_stops_the_snapshot_and_is_re_raised(ws, root):
    make_tree(root, 50)
    calls = 0

    def progress(p: cairn.Progress) -> None:
        nonlocal calls
        calls += 1
        raise Boom("stop here")

    with pytest.raises(Boom, match="stop here") as info:
        ws.snapshot("never", progress=progress, use_stat_cache=False)
    assert calls == 1  # not called again once it raised
    assert info.traceback[-1].name == "progress"  # the original exception, with its traceback
    assert ws.list() == []  # nothing recorded
    assert ws.snapshot("after").label == "after"  # and the workspace still works


def test_keyboard_interrupt_in_the_callback_propagates(ws):
    def progress(p):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ws.snapshot(progress=progress)
    assert ws.list() == []


class Interrupted(Exception):
    pass


def test_a_signal_arriving_while_the_library_works_stops_the_snapshot(big_tree, tmp_path):
    # What Ctrl-C does: the signal arrives while the main thread is in the library; Python runs
    # its handler at the next progress report (the trampoline every snapshot installs), and
    # the handler's exception stops the snapshot and propagates. SIGUSR1 stands for SIGINT.
    def handler(signum, frame):
        raise Interrupted

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        for attempt in range(3):
            with cairn.Workspace(big_tree, store=tmp_path / f"store{attempt}") as ws:
                under_way = threading.Event()
                sender = threading.Thread(target=lambda: under_way.wait(10) and os.kill(os.getpid(), signal.SIGUSR1))
                sender.start()
                try:
                    try:
                        ws.snapshot(progress=lambda p: p.files < BIG_FILES and under_way.set(), use_stat_cache=False)
                    finally:
                        under_way.set()
                        sender.join()
                    time.sleep(1)  # the walk was over first: the signal lands here
                except Interrupted:
                    if ws.list() == []:  # interrupted inside the snapshot: nothing recorded
                        return
        pytest.fail("the signal never landed during the snapshot")
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_cancelling_from_another_thread_stops_a_running_snapshot(big_tree, tmp_path):
    # The other thread cancels as soon as the first progress report arrives; the library sends
    # one before the walk starts, so the cancel always lands while the snapshot runs.
    for attempt in range(3):
        with cairn.Workspace(big_tree, store=tmp_path / f"store{attempt}") as ws, cairn.CancelToken() as token:
            under_way, cancelled = threading.Event(), threading.Event()

            def canceller():
                if under_way.wait(10):
                    token.cancel()
                cancelled.set()

            def progress(p: cairn.Progress) -> None:
                if p.files < BIG_FILES and not under_way.is_set():
                    under_way.set()
                    cancelled.wait(10)  # the walk goes on meanwhile: the cancel lands mid-walk

            t = threading.Thread(target=canceller)
            t.start()
            try:
                ws.snapshot(progress=progress, use_stat_cache=False, cancel=token)
            except cairn.CancelledError as e:
                assert "cancelled" in e.message
                assert ws.list() == []  # nothing recorded
                return
            finally:
                under_way.set()  # release the canceller if the walk never reported
                t.join()
    pytest.fail("the walk was over before the first progress report three times")


def test_another_python_thread_runs_while_a_large_snapshot_works(big):
    stop, counting = threading.Event(), threading.Event()
    iterations = 0

    def count():
        nonlocal iterations
        counting.set()
        while not stop.is_set():
            iterations += 1

    t = threading.Thread(target=count)
    t.start()
    counting.wait(5)
    start = time.monotonic()
    at_start = iterations
    snap = big.snapshot(use_stat_cache=False)  # no progress callback: no Python code runs in it
    progressed = iterations - at_start
    elapsed = time.monotonic() - start
    stop.set()
    t.join()
    assert snap.stats.files == BIG_FILES
    # Had the call held the GIL, the counter could not have moved while it ran.
    assert progressed > 1000, f"the other thread made {progressed} iterations in {elapsed:.3f}s"


def test_several_threads_share_one_workspace(ws, root):
    make_tree(root, 100)
    errors: list[BaseException] = []
    results: list[cairn.SnapshotInfo] = []

    def work(i: int) -> None:
        try:
            snap = ws.snapshot(f"t{i}")
            results.append(snap)
            ws.list()
            ws.diff(snap)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(s.label for s in ws.list()) == ["t0", "t1", "t2", "t3"]


def test_a_cancel_token_is_usable_from_any_thread_and_closes_once(ws):
    token = cairn.CancelToken()
    t = threading.Thread(target=token.cancel)
    t.start()
    t.join()
    assert token.cancelled
    token.close()
    token.close()
    with pytest.raises(cairn.ClosedError):
        token.cancel()
    with pytest.raises(cairn.ClosedError):
        ws.snapshot(cancel=token)
