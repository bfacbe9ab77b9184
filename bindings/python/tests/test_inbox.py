"""The inbox of a thread (issue 59): a prompt queued while a run is under way waits, is
delivered at the boundary with its checkpoint taken then, and a rewind cancels the one still
queued, whose old key answers with the cancelled admission."""

from __future__ import annotations

import pytest
from conftest import write

import cairn


@pytest.fixture
def threads(ws):
    with cairn.Threads(workspace=ws, checkpoints=True) as t:
        yield t


def test_a_prompt_queued_during_a_run_is_delivered_at_the_boundary_and_a_rewind_cancels_the_next(root, threads):
    threads.create("chat")
    start = threads.append("chat", "user", "start").entry
    with threads.begin_run("chat", lease=60) as run:
        queued = threads.enqueue("chat", "k-1", "second")
        assert isinstance(queued, cairn.Admission)
        assert (queued.state, queued.repeated, queued.text) == ("queued", False, "second")
        waiting = threads.deliver("chat")
        assert isinstance(waiting, cairn.Delivery)
        assert waiting.delivered is None and waiting.queued == 1
        assert waiting.waiting is not None and run.id in waiting.waiting
        write(root, "later.txt", "written before the delivery")
    d = threads.deliver("chat")
    assert d.delivered is not None and d.delivered.state == "delivered"
    assert d.entry is not None and d.entry.text == "second" and d.entry.key == "k-1"
    assert d.checkpoint is not None and d.delivered.checkpoint_id == d.checkpoint.id
    assert d.entry.checkpoint.snapshot_id == d.checkpoint.snapshot_id

    threads.enqueue("chat", "k-2", "third")
    report = threads.rewind("chat", start)
    again = threads.enqueue("chat", "k-2", "third")
    assert (again.state, again.repeated, again.rewind_id) == ("cancelled", True, report.rewind_id)
    assert threads.deliver("chat").delivered is None
    assert [(a.key, a.state) for a in threads.inbox("chat")] == [("k-1", "delivered"), ("k-2", "cancelled")]
    kinds = {e.kind for e in threads.events()}
    assert {"prompt_queued", "prompt_delivered", "prompt_cancelled"} <= kinds
