"""The handle base class: close() is idempotent, `with` closes, use after close raises
ClosedError, a finalizer backs up a forgotten close, and a close never frees a handle that a
running call still uses."""

from __future__ import annotations

import gc
import threading

import pytest

import cairn


def test_closing_twice_is_fine_for_every_handle(ws):
    hold = ws.hold("x")
    token = cairn.CancelToken()
    for h in (hold, token, ws):
        assert isinstance(h, cairn.Managed)
        assert not h.closed
        h.close()
        h.close()
        assert h.closed


def test_every_method_raises_closed_error_after_close(root, tmp_path):
    ws = cairn.Workspace(root, store=tmp_path / "store")
    snap = ws.snapshot()
    other = cairn.Workspace(root, store=tmp_path / "other")
    ws.close()
    calls = {
        "info": lambda: ws.info(),
        "snapshot": lambda: ws.snapshot(),
        "list": lambda: ws.list(),
        "show": lambda: ws.show(snap),
        "diff": lambda: ws.diff(snap),
        "delete": lambda: ws.delete(snap),
        "prune": lambda: ws.prune(count=1),
        "gc": lambda: ws.gc(),
        "verify": lambda: ws.verify(),
        "copy": lambda: ws.copy(snap, other),
        "copy to a closed one": lambda: other.copy(snap, ws),
        "plan": lambda: ws.plan(snap),
        "restore": lambda: ws.restore(snap),
        "recover": lambda: ws.recover(),
        "give_up": lambda: ws.give_up(),
        "hold": lambda: ws.hold("x"),
    }
    for name, call in calls.items():
        with pytest.raises(cairn.ClosedError, match="Workspace is closed"):
            call()
            pytest.fail(f"{name} worked after close")
    with pytest.raises(cairn.ClosedError):
        with ws:
            pass
    other.close()
    assert "closed" in repr(ws)


def test_with_closes_even_when_the_block_raises(root, tmp_path):
    with pytest.raises(RuntimeError):
        with cairn.Workspace(root, store=tmp_path / "store") as ws:
            raise RuntimeError("boom")
    assert ws.closed


def test_a_forgotten_handle_is_freed_by_its_finalizer(root, tmp_path):
    ws = cairn.Workspace(root, store=tmp_path / "store")
    finalizer = ws._finalizer
    assert finalizer.alive
    del ws
    gc.collect()
    assert not finalizer.alive
    # A hold dropped without release is released too: restores work again.
    with cairn.Workspace(root, store=tmp_path / "store") as ws:
        snap = ws.snapshot()
        ws.hold("forgotten")
        gc.collect()
        ws.restore(snap)


def test_close_from_another_thread_waits_for_the_running_call(big_tree, tmp_path):
    ws = cairn.Workspace(big_tree, store=tmp_path / "store")
    in_call, closed = threading.Event(), threading.Event()

    def progress(p):
        in_call.set()
        closed.wait(10)  # hold the call open until the other thread has closed the handle

    def closer():
        in_call.wait(10)
        ws.close()  # returns at once; the handle is freed when the snapshot returns
        closed.set()

    t = threading.Thread(target=closer)
    t.start()
    snap = ws.snapshot(progress=progress)
    t.join()
    assert snap.stats.files > 0  # the call finished on a live handle
    assert ws.closed and not ws._finalizer.alive  # ... and the handle was freed after it
    with pytest.raises(cairn.ClosedError):
        ws.list()


def test_closing_inside_its_own_progress_callback_is_deferred(ws):
    snap = ws.snapshot(progress=lambda p: ws.close())
    assert len(snap.id) == 64
    assert ws.closed and not ws._finalizer.alive
