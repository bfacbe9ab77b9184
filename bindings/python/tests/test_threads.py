"""Threads: append with checkpoints, memory, runs and tool calls, rewind, restore_before,
fork, events, and the thread error kinds (VALIDATION, THREAD_BUSY, WORKSPACE_BUSY,
RUN_INTERRUPTED)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write

import cairn


@pytest.fixture
def threads(ws):
    with cairn.Threads(workspace=ws, checkpoints=True) as t:
        yield t


def test_a_conversation_rewinds_with_its_files(ws, root, threads):
    chat = threads.create("chat", metadata={"model": "m1"})
    assert isinstance(chat, cairn.Thread) and chat.id == "chat" and chat.metadata == {"model": "m1"}
    assert [t.id for t in threads.list()] == ["chat"]

    first = threads.append(chat, "user", "create the app")
    assert isinstance(first, cairn.Appended)
    assert first.checkpoint is not None and first.checkpoint.kind == "user"
    assert first.entry.checkpoint.snapshot_id == first.checkpoint.snapshot_id
    write(root, "app.py", "v1")
    threads.append(chat, "assistant", "created app.py")

    second = threads.append("chat", "user", "change it")
    write(root, "app.py", "v2")
    write(root, "extra.py", "added later")
    threads.append("chat", "assistant", "changed")
    item = threads.add_memory("chat", "the app is in app.py", stands_on=[second.entry])
    assert item.status == "active" and item.stands_on == [second.entry.id]
    assert [m.id for m in threads.memory("chat")] == [item.id]

    checkpoints = threads.list_checkpoints("chat")
    assert [c.entry_id for c in checkpoints] == [first.entry.id, second.entry.id]
    assert all(isinstance(c, cairn.Checkpoint) and c.root == str(root.resolve()) for c in checkpoints)
    log = threads.log("chat")
    assert [e.kind for e in log] == ["user", "assistant", "user", "assistant"]
    assert [e.text for e in log][0] == "create the app"

    # A dry run says what would happen and changes nothing.
    dry = threads.restore_before("chat", second.entry, files=True, dry_run=True)
    assert dry.dry_run and (root / "extra.py").exists()

    report = threads.restore_before("chat", second.entry, files=True)
    assert isinstance(report, cairn.RewindReport)
    assert report.conversation.rewound
    assert report.conversation.cut == [e.id for e in log[2:]]
    assert report.memory.staled == [item.id]
    assert report.files is not None and report.files.exact
    assert isinstance(report.files.restore, cairn.RestoreReport)
    assert "extra.py" in report.files.restore.deleted
    assert (root / "app.py").read_text() == "v1"
    assert not (root / "extra.py").exists()
    assert [e.id for e in threads.log("chat")] == [e.id for e in log[:2]]
    assert len(threads.log("chat", all=True)) == 4  # nothing is deleted
    assert threads.memory("chat") == [] or all(m.status == "stale" for m in threads.memory("chat"))

    # The files can come back: the rewind's safety snapshot.
    ws.restore(report.files.safety_snapshot_id)
    assert (root / "extra.py").read_text() == "added later"

    # Rewind to the first entry (the files as they were before it: no app.py).
    back = threads.rewind("chat", first.entry.id, files=True, force=True)
    assert back.to_entry_id == first.entry.id
    assert not (root / "app.py").exists()

    kinds = [e.kind for e in threads.events()]
    assert {"thread_created", "checkpoint_created", "entry_appended", "rewind_completed"} <= set(kinds)
    events = threads.events(limit=2)
    assert len(events) == 2 and threads.events(cursor=events[-1].cursor)[0].cursor > events[-1].cursor


def test_the_before_rewind_checkpoint_brings_back_the_files_and_the_conversation(threads, root):
    threads.create("chat")
    write(root, "app.py", "v1")
    threads.append("chat", "user", "change it")
    write(root, "app.py", "v2")
    done = threads.append("chat", "assistant", "changed")
    threads.append("chat", "user", "again")
    write(root, "app.py", "v3")
    last = threads.append("chat", "assistant", "changed again")
    report = threads.rewind("chat", done.entry, files=True)
    assert (root / "app.py").read_text() == "v2"
    cp = report.files.before_rewind_checkpoint_id
    assert cp and cp in [c.id for c in threads.list_checkpoints("chat")]
    back = threads.rewind("chat", cp, files=True)
    assert back.to_entry_id == last.entry.id
    assert (root / "app.py").read_text() == "v3"
    assert threads.log("chat")[-1].id == last.entry.id


def test_fork_makes_a_new_thread_sharing_the_prefix(threads, root, tmp_path):
    threads.create("main")
    first = threads.append("main", "user", "hello")
    threads.append("main", "assistant", "hi")
    threads.append("main", "user", "go on")
    report = threads.fork("main", first.entry, new_thread_id="side", metadata={"why": "try another way"})
    assert isinstance(report, cairn.ForkReport)
    assert report.thread_id == "side" and report.source_thread_id == "main" and report.at_entry_id == first.entry.id
    assert {t.id for t in threads.list()} == {"main", "side"}
    side = [t for t in threads.list() if t.id == "side"][0]
    assert side.parent_thread == "main"
    assert [e.id for e in threads.log("side")] == [first.entry.id]

    # A fork with files into another workspace.
    other_root = tmp_path / "fork-root"
    other_root.mkdir()
    with cairn.Workspace(other_root, store=tmp_path / "fork-store") as other:
        forked = threads.fork("main", first.entry, files=True, new_thread_id="side2", workspace=other)
        assert forked.files is not None
        assert (other_root / "README.md").read_text() == "# project\n"


def test_runs_tool_calls_and_their_end(threads):
    threads.create("chat")
    with threads.begin_run("chat", lease=60) as run:
        assert isinstance(run, cairn.Run) and run.id
        run.heartbeat()
        with run.tool("bash") as call:
            assert call
            going = threads.runs("chat").going
            assert [r.id for r in going] == [run.id] and going[0].open_tool_calls == 1 and going[0].here
        assert threads.runs("chat").going[0].open_tool_calls == 0
        threads.append("chat", "user", "from the run", run=run)
    assert run.status == "ended" and run.closed
    assert threads.runs("chat").going == []


def test_append_with_a_key_is_admitted_once(threads):
    threads.create("chat")
    one = threads.append("chat", "user", "hello", key="msg-1")
    two = threads.append("chat", "user", "hello", key="msg-1")
    assert not one.repeated and two.repeated and two.entry.id == one.entry.id
    assert len(threads.log("chat")) == 1


def test_payloads_are_exact_bytes(threads):
    threads.create("chat")
    raw = b"\xff\x00not utf-8"
    entry = threads.append("chat", "tool", raw, metadata={"tool": "cat"}).entry
    assert entry.payload == raw and entry.metadata == {"tool": "cat"}
    assert threads.log("chat")[0].payload == raw


def test_a_rewind_puts_back_a_file_whose_name_is_not_utf8(ws, root, threads):
    name = b"caf\xe9.txt"
    write(root, name, "before")
    threads.create("chat")
    first = threads.append("chat", "user", "edit it")
    write(root, name, "after")
    report = threads.restore_before("chat", first.entry, files=True)
    assert os.fsdecode(name) in report.files.restore.restored
    assert Path(root, os.fsdecode(name)).read_text() == "before"


def test_a_manual_checkpoint(threads, root):
    threads.create("chat")
    threads.append("chat", "user", "hello")
    cp = threads.checkpoint("chat", "before the refactor")
    assert cp.kind == "manual" and cp.label == "before the refactor"


def test_threads_database_at_a_path(root, tmp_path):
    db = tmp_path / "db" / "threads.db"
    db.parent.mkdir()
    with cairn.Threads(db) as t:
        t.create("x")
    with cairn.Threads(db) as t:
        assert [th.id for th in t.list()] == ["x"]
    with pytest.raises(cairn.InvalidArgumentError, match="database path"):
        cairn.Threads()  # neither a path nor a workspace


# -- the thread error kinds -----------------------------------------------------------------------


def test_validation_for_a_thread_id_taken_or_no_checkpoint(threads, ws):
    threads.create("chat")
    with pytest.raises(cairn.ValidationError) as info:
        threads.create("chat")
    assert info.value.kind == "VALIDATION"
    with cairn.Threads(workspace=ws) as no_checkpoints:  # policy off: no checkpoint is taken
        no_checkpoints.create("bare")
        e = no_checkpoints.append("bare", "user", "hello").entry
        with pytest.raises(cairn.ValidationError, match="no checkpoint"):
            no_checkpoints.rewind("bare", e, files=True)


def test_not_found_for_an_unknown_thread(threads):
    with pytest.raises(cairn.NotFoundError):
        threads.log("no-such-thread")


def test_thread_busy_while_a_run_goes_and_run_interrupted_after_a_forced_rewind(threads):
    threads.create("chat")
    first = threads.append("chat", "user", "hello").entry
    threads.append("chat", "assistant", "hi")
    run = threads.begin_run("chat")
    with pytest.raises(cairn.ThreadBusyError) as info:
        threads.rewind("chat", first)
    assert isinstance(info.value, cairn.BusyError)
    report = threads.rewind("chat", first, force=True)
    assert report.runs.interrupted == [run.id]
    with pytest.raises(cairn.RunInterruptedError):
        run.heartbeat()
    assert run.end() == "interrupted"
    run.close()


def test_workspace_busy_while_another_threads_run_goes_in_the_workspace(threads):
    threads.create("a")
    threads.create("b")
    first = threads.append("a", "user", "hello").entry
    threads.append("a", "assistant", "hi")
    with threads.begin_run("b"):
        with pytest.raises(cairn.WorkspaceBusyError) as info:
            threads.rewind("a", first, files=True)
        assert isinstance(info.value, cairn.BusyError)
        assert threads.rewind("a", first, files=False).conversation.rewound  # the files alone are busy


# -- handles --------------------------------------------------------------------------------------


def test_threads_and_runs_close_twice_and_refuse_use_after_close(ws):
    t = cairn.Threads(workspace=ws)
    t.create("chat")
    run = t.begin_run("chat")
    run.close()
    run.close()
    with pytest.raises(cairn.ClosedError):
        run.heartbeat()
    t.close()
    t.close()
    with pytest.raises(cairn.ClosedError, match="Threads is closed"):
        t.list()
    with pytest.raises(cairn.ClosedError):
        t.append("chat", "user", "x")


def test_a_postgres_url_names_a_database_two_handles_share():
    url = os.environ.get("CAIRN_TEST_PG_URL")
    if not url:
        pytest.skip("CAIRN_TEST_PG_URL is not set (scripts/test starts a PostgreSQL server and sets it)")
    tid = f"py-{os.getpid()}"
    with cairn.Threads(url) as a, cairn.Threads(url) as b:
        a.create(tid)
        a.append(tid, "user", "hello from a")
        assert [e.text for e in b.log(tid)] == ["hello from a"]


def test_a_postgres_url_nobody_answers_at_raises_an_io_error_without_the_password():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(cairn.CairnIOError) as info:
        cairn.Threads(f"postgres://agent:s3cret@127.0.0.1:{port}/threads")
    assert f"postgres://agent:***@127.0.0.1:{port}/threads" in str(info.value)
    assert "s3cret" not in str(info.value)


def test_a_rewind_repeated_with_its_request_key_answers_the_same_rewind_and_runs_once(threads, root):
    # Issue 59: the key passes through the bindings to the rewind's record.
    threads.create("chat")
    first = threads.append("chat", "user", "one")
    threads.append("chat", "user", "two")
    write(root, "two.txt", "2")  # written in turn two: the rewind to turn one takes it away
    done = threads.rewind("chat", first.entry.id, files=True, key="k-binding")
    assert not (root / "two.txt").exists()
    write(root, "two.txt", "again")
    again = threads.rewind("chat", first.entry.id, files=True, key="k-binding")
    assert again.rewind_id == done.rewind_id
    assert (root / "two.txt").read_text() == "again"  # nothing ran a second time
    started = [e for e in threads.events() if e.kind == "rewind_started"]
    assert len(started) == 1
