"""The exception hierarchy: one class per status, and every kind that can be provoked today."""

from __future__ import annotations

import glob
import os
import pickle
import re
from pathlib import Path

import pytest
from conftest import write

import cairn
from cairn import _ffi

EXPECTED = {
    "INVALID_ARGUMENT": (cairn.InvalidArgumentError, ValueError),
    "NOT_FOUND": (cairn.NotFoundError, FileNotFoundError),
    "VALIDATION": (cairn.ValidationError, None),
    "BUSY": (cairn.BusyError, None),
    "WORKSPACE_BUSY": (cairn.WorkspaceBusyError, cairn.BusyError),
    "THREAD_BUSY": (cairn.ThreadBusyError, cairn.BusyError),
    "DENIED": (cairn.DeniedError, PermissionError),
    "IO": (cairn.CairnIOError, OSError),
    "CORRUPT": (cairn.CorruptError, None),
    "CONFLICT": (cairn.ConflictError, None),
    "CANCELLED": (cairn.CancelledError, None),
    "RUN_INTERRUPTED": (cairn.RunInterruptedError, None),
    "UNSUPPORTED": (cairn.UnsupportedError, None),
    "NULL_ARGUMENT": (cairn.NullArgumentError, None),
    "PANIC": (cairn.PanicError, None),
    "ABORTED_BY_CALLBACK": (cairn.AbortedByCallbackError, None),
}


def header_statuses(header: str) -> dict[str, int]:
    return {n: int(v) for n, v in re.findall(r"\bCAIRN_ERR_(\w+) = (\d+)", header)}


def test_every_status_in_the_header_maps_to_its_class(header):
    statuses = header_statuses(header)
    assert set(statuses) == set(EXPECTED), "a status was added or removed: extend the error table"
    for name, code in statuses.items():
        cls, builtin = EXPECTED[name]
        assert cairn.error_class(code) is cls
        assert cls.kind == name == _ffi.status_name(code)
        assert cls.code == code
        assert issubclass(cls, cairn.CairnError)
        if builtin is not None:
            assert issubclass(cls, builtin)
        exc = cairn.errors.from_status(code)  # no detail object: the status's description
        assert type(exc) is cls and exc.kind == name and exc.code == code
        assert exc.message == _ffi.status_str(code)


def test_an_unknown_status_is_a_plain_cairn_error():
    exc = cairn.errors.from_status(4242)
    assert type(exc) is cairn.CairnError
    assert exc.kind == "UNKNOWN" and exc.code == 4242


def test_errors_pickle_and_keep_their_fields():
    exc = cairn.NotFoundError("snapshot 'x' not found", code=2, path="/tmp/x")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cairn.NotFoundError
    assert (back.kind, back.code, back.path, back.message) == ("NOT_FOUND", 2, "/tmp/x", exc.message)
    assert back.errno == 2 and back.filename == "/tmp/x"


# -- every kind that can be provoked through the public API -------------------------------------


def test_invalid_argument(ws, root):
    with pytest.raises(cairn.InvalidArgumentError) as info:
        ws.snapshot(excludes=["a[b"])
    assert info.value.kind == "INVALID_ARGUMENT" and "a[b" in info.value.message
    with pytest.raises(ValueError):  # also a ValueError
        ws.restore(ws.snapshot().id, reference="zz")
    with pytest.raises(cairn.InvalidArgumentError, match="UTF-8"):
        ws.show("caf\udce9")  # a name that is not UTF-8
    with pytest.raises(cairn.InvalidArgumentError, match="not a directory"):
        cairn.Workspace(root / "README.md")
    with pytest.raises(cairn.InvalidArgumentError):
        cairn.Workspace("")


def test_not_found(ws, tmp_path):
    with pytest.raises(cairn.NotFoundError) as info:
        ws.show("no-such-label")
    assert info.value.code == 2
    with pytest.raises(FileNotFoundError) as info:
        cairn.Workspace(tmp_path / "missing")
    assert info.value.path == str(tmp_path / "missing")
    assert info.value.errno == 2


def test_busy_while_a_hold_stands(ws, root):
    snap = ws.snapshot()
    write(root, "README.md", "changed")
    with ws.hold("make test"):
        with pytest.raises(cairn.BusyError, match="make test") as info:
            ws.restore(snap)
        assert type(info.value) is cairn.BusyError
    ws.restore(snap)
    assert (root / "README.md").read_text() == "# project\n"


def test_denied_when_a_path_is_not_safe_to_change(ws, root):
    write(root, "gen.txt", "generated 1")
    snap = ws.snapshot()
    write(root, ".gitignore", "gen.txt\n")  # now ignored: no snapshot could keep it
    write(root, "gen.txt", "generated 2")
    with pytest.raises(cairn.DeniedError) as info:
        ws.restore(snap)
    assert isinstance(info.value, PermissionError)
    assert info.value.path == str(root.resolve() / "gen.txt")
    assert (root / "gen.txt").read_text() == "generated 2"  # nothing changed


def test_io_error_names_its_path(root, tmp_path):
    write(tmp_path, "a-file", "not a directory")
    with pytest.raises(cairn.CairnIOError) as info:
        cairn.Workspace(root, store=tmp_path / "a-file" / "store")
    assert isinstance(info.value, OSError)
    assert info.value.path == str(tmp_path / "a-file" / "store")


def test_corrupt_when_a_store_directory_is_a_symlink(root, tmp_path):
    store = tmp_path / "store"
    cairn.Workspace(root, store=store).close()
    (store / "tmp").rename(store / "tmp-real")
    (store / "tmp").symlink_to("tmp-real")
    with pytest.raises(cairn.CorruptError) as info:
        cairn.Workspace(root, store=store)
    assert info.value.path == str(store / "tmp")


def test_conflict_when_refusing_drifted_files(ws, root):
    first = ws.snapshot()
    write(root, "README.md", "second")
    write(root, "src/main.py", "second")
    second = ws.snapshot()
    write(root, "README.md", "edited by someone else")
    with pytest.raises(cairn.ConflictError) as info:
        ws.restore(first, reference=second, on_drift="refuse")
    assert info.value.path == str(root.resolve() / "README.md")
    # With "skip" the drifted file is left alone and the rest restored. (A restore whose
    # only change is a skipped drifted file is refused by the library as "changed since the
    # plan was made": reported, see the binding's README.)
    report = ws.restore(first, reference=second, on_drift="skip")
    assert report.drifted == ["README.md"] and report.restored == ["src/main.py"]
    assert cairn.KeptPath("README.md", "drifted") in report.kept
    assert (root / "README.md").read_text() == "edited by someone else"


def test_cancelled_by_a_token_cancelled_before_the_call(ws):
    with cairn.CancelToken() as token:
        token.cancel()
        assert token.cancelled
        with pytest.raises(cairn.CancelledError):
            ws.snapshot(cancel=token, use_stat_cache=False)
        snap = ws.snapshot()
        with pytest.raises(cairn.CancelledError):
            ws.restore(snap, cancel=token)
        with pytest.raises(cairn.CancelledError):
            ws.plan(snap, cancel=token)
    assert [s.id for s in ws.list()] == [snap.id]


def test_unsupported_format_version(ws, root, tmp_path):
    write(root, "big.bin", os.urandom(2 << 20))  # over 1 MiB: stored as a large object
    snap = ws.snapshot()
    (obj,) = [p for p in glob.glob(str(tmp_path / "store/objects/large/**"), recursive=True) if os.path.isfile(p)]
    data = bytearray(Path(obj).read_bytes())
    data[8:12] = (99).to_bytes(4, "little")  # the header's format version
    Path(obj).write_bytes(bytes(data))
    (root / "big.bin").unlink()
    with pytest.raises(cairn.UnsupportedError, match="format version 99") as info:
        ws.restore(snap)
    assert info.value.path == obj


def test_aborted_by_a_callback_returning_false(ws):
    before = ws.list()
    with pytest.raises(cairn.AbortedByCallbackError):
        ws.snapshot(progress=lambda p: False)
    assert ws.list() == before


def test_closed_is_a_cairn_error_too(ws):
    ws.close()
    with pytest.raises(cairn.ClosedError, match="closed") as info:
        ws.list()
    assert isinstance(info.value, cairn.CairnError) and info.value.kind == "CLOSED"


# NULL_ARGUMENT and PANIC are provoked through the thin layer (test_ffi.py); VALIDATION,
# WORKSPACE_BUSY, THREAD_BUSY and RUN_INTERRUPTED through the thread API (test_threads.py).
