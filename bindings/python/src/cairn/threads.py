"""Threads: conversations whose messages carry checkpoints of the workspace, and the rewind
and fork that move the files and the conversation back together (``cairn_threads_*``).

A :class:`Threads` handle opens a thread database (SQLite, shared safely by threads and
processes), by default ``<store>/threads.db`` of a workspace. Entries are appended to a
thread; with a checkpoint policy on, a user entry is preceded by a snapshot of the workspace.
:meth:`Threads.rewind` (or :meth:`Threads.restore_before`) takes the conversation, its memory
and, with ``files=True``, the files back to an entry; nothing is ever deleted. A :class:`Run`
is an agent run of a thread, with a lease and tool calls; rewinds refuse to pull the floor
from under a going run unless forced.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from ._ffi import bytes_of, ffi, lib
from ._handle import Managed, call_bytes, call_json, check, json_arg, text_arg
from .types import RestoreReport, decode_path, millis
from .workspace import Workspace, _options

__all__ = [
    "Threads",
    "Run",
    "CheckpointPolicy",
    "EntryKind",
    "Thread",
    "CheckpointRef",
    "Entry",
    "Checkpoint",
    "CheckpointFailure",
    "Appended",
    "Admission",
    "Delivery",
    "MemoryItem",
    "RunInfo",
    "ThreadRuns",
    "ConversationReport",
    "FilesReport",
    "MemoryReport",
    "RunsReport",
    "RewindReport",
    "ForkReport",
    "Event",
]

#: The kind of an entry.
EntryKind = Literal["user", "assistant", "tool", "note", "event", "compaction"]

def _opt_millis(value: _dt.timedelta | float | None) -> int | None:
    return None if value is None else millis(value)


# -- inputs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointPolicy:
    """When checkpoints are taken: before each user entry when ``enabled``, and before tool
    entries and compactions when asked. ``exclude`` and ``max_file_bytes`` shape the
    snapshots."""

    enabled: bool = True
    exclude: tuple[str, ...] = ()
    max_file_bytes: int | None = None
    before_tools: bool | None = None
    before_compaction: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            **_options(
                exclude=list(self.exclude) or None,
                max_file_bytes=self.max_file_bytes,
                before_tools=self.before_tools,
                before_compaction=self.before_compaction,
            ),
        }

    @staticmethod
    def of(value: CheckpointPolicy | bool | None) -> dict[str, Any] | None:
        """``True``/``False`` mean the default policy on/off."""
        if value is None:
            return None
        if isinstance(value, bool):
            return CheckpointPolicy(enabled=value).to_json()
        return value.to_json()


# -- results -------------------------------------------------------------------------------------


def _opt_path(value: Any) -> str | None:
    return None if value is None else decode_path(value)


@dataclass(frozen=True)
class CheckpointRef:
    """Where a checkpoint is: its snapshot in a workspace's store."""

    checkpoint_id: str
    snapshot_id: str
    workspace_id: str
    root: str

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> CheckpointRef | None:
        if d is None:
            return None
        return cls(d["checkpoint_id"], d["snapshot_id"], d["workspace_id"], decode_path(d["root"]))


@dataclass(frozen=True)
class Thread:
    """A thread: a tree of entries with one active branch."""

    id: str
    active_leaf: str | None
    parent_thread: str | None
    """The thread it was forked from."""
    fork_entry: str | None
    file_checkpoint_at: CheckpointRef | None
    metadata: dict[str, Any]
    created_ms: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Thread:
        return cls(
            id=d["id"],
            active_leaf=d.get("active_leaf"),
            parent_thread=d.get("parent_thread"),
            fork_entry=d.get("fork_entry"),
            file_checkpoint_at=CheckpointRef.from_json(d.get("file_checkpoint_at")),
            metadata=d.get("metadata") or {},
            created_ms=d.get("created_ms", 0),
        )


@dataclass(frozen=True)
class Entry:
    """One entry of a thread. ``payload`` is the exact bytes appended; ``text`` decodes it."""

    id: str
    thread_id: str
    parent_id: str | None
    kind: str
    payload: bytes
    metadata: dict[str, Any]
    checkpoint: CheckpointRef | None
    """The checkpoint taken before it, if one was."""
    run_id: str | None
    key: str | None
    created_ms: int
    seq: int
    on_active_branch: bool

    @property
    def text(self) -> str:
        """The payload as text (undecodable bytes replaced)."""
        return self.payload.decode("utf-8", "replace")

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Entry:
        p = d.get("payload", "")
        payload = bytes.fromhex(p["hex"]) if isinstance(p, dict) else p.encode("utf-8")
        return cls(
            id=d["id"],
            thread_id=d["thread_id"],
            parent_id=d.get("parent_id"),
            kind=d["kind"],
            payload=payload,
            metadata=d.get("metadata") or {},
            checkpoint=CheckpointRef.from_json(d.get("checkpoint")),
            run_id=d.get("run_id"),
            key=d.get("key"),
            created_ms=d.get("created_ms", 0),
            seq=d.get("seq", 0),
            on_active_branch=bool(d.get("on_active_branch", False)),
        )


@dataclass(frozen=True)
class Checkpoint:
    """A snapshot the thread layer took, bound to a thread and an entry. ``kind`` is
    ``"user"``, ``"tool"``, ``"compaction"`` or ``"manual"``."""

    id: str
    thread_id: str
    entry_id: str | None
    kind: str
    label: str | None
    snapshot_id: str
    workspace_id: str
    root: str
    run_id: str | None
    created_ms: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Checkpoint:
        return cls(
            id=d["id"],
            thread_id=d["thread_id"],
            entry_id=d.get("entry_id"),
            kind=d["kind"],
            label=d.get("label"),
            snapshot_id=d["snapshot_id"],
            workspace_id=d["workspace_id"],
            root=decode_path(d["root"]),
            run_id=d.get("run_id"),
            created_ms=d.get("created_ms", 0),
        )


@dataclass(frozen=True)
class CheckpointFailure:
    """A checkpoint that was due and failed; the entry was saved without one."""

    kind: str
    message: str


@dataclass(frozen=True)
class Appended:
    """What an append did: the entry, the checkpoint taken before it (if any), and whether the
    admission key had been seen (``repeated``: the first entry, nothing written)."""

    entry: Entry
    checkpoint: Checkpoint | None
    checkpoint_error: CheckpointFailure | None
    repeated: bool

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Appended:
        cp, err = d.get("checkpoint"), d.get("checkpoint_error")
        return cls(
            entry=Entry.from_json(d["entry"]),
            checkpoint=None if cp is None else Checkpoint.from_json(cp),
            checkpoint_error=None if err is None else CheckpointFailure(str(err.get("kind")), err.get("message", "")),
            repeated=bool(d.get("repeated", False)),
        )


@dataclass(frozen=True)
class Admission:
    """A prompt of a thread's inbox under its admission key: ``state`` ``"queued"`` (waiting
    for the thread's next safe boundary), ``"delivered"`` (``entry_id``, ``checkpoint_id``) or
    ``"cancelled"`` by a rewind (``rewind_id``; never sent). ``repeated``: the key was seen
    before and nothing was queued again."""

    thread_id: str
    key: str
    state: str
    payload: bytes
    metadata: dict[str, Any]
    entry_id: str | None
    checkpoint_id: str | None
    rewind_id: str | None
    error: str | None
    queued_ms: int
    done_ms: int | None
    repeated: bool

    @property
    def text(self) -> str:
        """The prompt as text (undecodable bytes replaced)."""
        return self.payload.decode("utf-8", "replace")

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Admission:
        p = d.get("payload", "")
        return cls(
            thread_id=d["thread_id"],
            key=d["key"],
            state=d["state"],
            payload=bytes.fromhex(p["hex"]) if isinstance(p, dict) else p.encode("utf-8"),
            metadata=d.get("metadata") or {},
            entry_id=d.get("entry_id"),
            checkpoint_id=d.get("checkpoint_id"),
            rewind_id=d.get("rewind_id"),
            error=d.get("error"),
            queued_ms=d.get("queued_ms", 0),
            done_ms=d.get("done_ms"),
            repeated=bool(d.get("repeated", False)),
        )


@dataclass(frozen=True)
class Delivery:
    """What :meth:`Threads.deliver` did: the prompt ``delivered`` (with the ``entry`` it
    became and the ``checkpoint`` taken then), or ``waiting`` saying what is under way; and how
    many prompts are still ``queued``."""

    delivered: Admission | None
    entry: Entry | None
    checkpoint: Checkpoint | None
    waiting: str | None
    queued: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Delivery:
        a, e, cp = d.get("delivered"), d.get("entry"), d.get("checkpoint")
        return cls(
            delivered=None if a is None else Admission.from_json(a),
            entry=None if e is None else Entry.from_json(e),
            checkpoint=None if cp is None else Checkpoint.from_json(cp),
            waiting=d.get("waiting"),
            queued=d.get("queued", 0),
        )


@dataclass(frozen=True)
class MemoryItem:
    """A memory item (``kind`` ``"item"`` or ``"summary"``) and the entries it stands on.
    A rewind that cuts one of them makes it ``"stale"`` (with a ``reason``)."""

    id: str
    thread_id: str
    kind: str
    text: str
    stands_on: list[str]
    status: str
    reason: str | None
    rewind_id: str | None
    created_ms: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MemoryItem:
        return cls(
            id=d["id"],
            thread_id=d["thread_id"],
            kind=d["kind"],
            text=d.get("text", ""),
            stands_on=list(d.get("stands_on", [])),
            status=d.get("status", "active"),
            reason=d.get("reason"),
            rewind_id=d.get("rewind_id"),
            created_ms=d.get("created_ms", 0),
        )


@dataclass(frozen=True)
class RunInfo:
    """A run as the database sees it: ``status`` is ``"running"``, ``"paused"``,
    ``"ended"``, ``"interrupted"`` or ``"dropped"``; ``here`` says this process holds it."""

    id: str
    thread_id: str
    workspace_id: str | None
    root: str | None
    durable: bool
    parent_run: str | None
    status: str
    going: bool
    here: bool
    lease_expires_ms: int
    open_tool_calls: int
    started_ms: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunInfo:
        return cls(
            id=d["id"],
            thread_id=d["thread_id"],
            workspace_id=d.get("workspace_id"),
            root=_opt_path(d.get("root")),
            durable=bool(d.get("durable", False)),
            parent_run=d.get("parent_run"),
            status=d.get("status", ""),
            going=bool(d.get("going", False)),
            here=bool(d.get("here", False)),
            lease_expires_ms=d.get("lease_expires_ms", 0),
            open_tool_calls=d.get("open_tool_calls", 0),
            started_ms=d.get("started_ms", 0),
        )


@dataclass(frozen=True)
class ThreadRuns:
    """The runs of a thread: going, paused, and durable ones."""

    going: list[RunInfo]
    paused: list[RunInfo]
    durable: list[RunInfo]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ThreadRuns:
        return cls(*([RunInfo.from_json(r) for r in d.get(k, [])] for k in ("going", "paused", "durable")))


@dataclass(frozen=True)
class ConversationReport:
    """What a rewind did to the conversation: the entries cut from the active branch, and those
    put back on it (a rewind to a "Before rewind" checkpoint brings back what a rewind cut)."""

    rewound: bool
    cut: list[str]
    previous_leaf_id: str | None
    restored: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FilesReport:
    """What a rewind or fork did to the files: the checkpoint restored (``exact`` when it was
    taken right before the entry), the safety snapshot, and the restore's report."""

    entry_id: str | None
    checkpoint_id: str
    snapshot_id: str
    exact: bool
    workspace_id: str
    root: str
    safety_snapshot_id: str | None
    restore: RestoreReport | None
    #: A rewind's "Before rewind" checkpoint (its safety snapshot at the leaf it left):
    #: rewinding to it with files brings back the files and the conversation.
    before_rewind_checkpoint_id: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> FilesReport | None:
        if d is None:
            return None
        restore = d.get("restore")
        return cls(
            entry_id=d.get("entry_id"),
            checkpoint_id=d["checkpoint_id"],
            snapshot_id=d["snapshot_id"],
            exact=bool(d.get("exact", False)),
            workspace_id=d["workspace_id"],
            root=decode_path(d["root"]),
            safety_snapshot_id=d.get("safety_snapshot_id"),
            restore=RestoreReport.from_json(restore) if isinstance(restore, dict) and restore else None,
            before_rewind_checkpoint_id=d.get("before_rewind_checkpoint_id"),
        )


@dataclass(frozen=True)
class MemoryReport:
    """The memory items a rewind made stale."""

    staled: list[str]


@dataclass(frozen=True)
class RunsReport:
    """What a rewind or fork did to runs: those still going, interrupted, paused, durable."""

    going: list[str]
    interrupted: list[str]
    paused: list[str]
    durable: list[str]

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> RunsReport:
        d = d or {}
        return cls(*(list(d.get(k, [])) for k in ("going", "interrupted", "paused", "durable")))


@dataclass(frozen=True)
class RewindReport:
    """What a rewind did (or, with ``dry_run``, would do): conversation, files, memory, runs."""

    rewind_id: str | None
    thread_id: str
    to_entry_id: str | None
    dry_run: bool
    conversation: ConversationReport
    files: FilesReport | None
    memory: MemoryReport
    runs: RunsReport
    recovered: bool
    #: An agent's thread (Claude Code's hooks): where the agent's own conversation continues
    #: (``argv``: the command that continues it; ``session_id``: its new session), kept with
    #: the rewind; ``None`` for other threads.
    continuation: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RewindReport:
        c = d.get("conversation", {})
        return cls(
            rewind_id=d.get("rewind_id"),
            thread_id=d["thread_id"],
            to_entry_id=d.get("to_entry_id"),
            dry_run=bool(d.get("dry_run", False)),
            conversation=ConversationReport(
                bool(c.get("rewound")), list(c.get("cut", [])), c.get("previous_leaf_id"), list(c.get("restored", []))
            ),
            files=FilesReport.from_json(d.get("files")),
            memory=MemoryReport(list(d.get("memory", {}).get("staled", []))),
            runs=RunsReport.from_json(d.get("runs")),
            recovered=bool(d.get("recovered", False)),
            continuation=d.get("continuation"),
        )


@dataclass(frozen=True)
class ForkReport:
    """What a fork did: the new thread, and with files the checkpoint restored into its
    workspace."""

    thread_id: str
    source_thread_id: str
    at_entry_id: str
    dry_run: bool
    file_checkpoint_at: CheckpointRef | None
    snapshots_copied: list[str]
    files: FilesReport | None
    runs: RunsReport

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ForkReport:
        return cls(
            thread_id=d["thread_id"],
            source_thread_id=d["source_thread_id"],
            at_entry_id=d["at_entry_id"],
            dry_run=bool(d.get("dry_run", False)),
            file_checkpoint_at=CheckpointRef.from_json(d.get("file_checkpoint_at")),
            snapshots_copied=list(d.get("snapshots_copied", [])),
            files=FilesReport.from_json(d.get("files")),
            runs=RunsReport.from_json(d.get("runs")),
        )


@dataclass(frozen=True)
class Event:
    """An event of the database's append-only log; pass ``cursor`` to the next
    :meth:`Threads.events` call. ``kind`` is ``"thread_created"``,
    ``"checkpoint_created"``, ``"entry_appended"``, ``"rewind_started"``,
    ``"restore_applied"`` (files restored: a rewind's, or a restore of the workspace),
    ``"rewind_failed"``, ``"rewind_completed"``, ``"fork_created"``, or for the inbox
    ``"prompt_queued"``, ``"prompt_delivered"``, ``"prompt_cancelled"``."""

    cursor: int
    thread_id: str | None
    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    created_ms: int = 0

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        return cls(d["cursor"], d.get("thread_id"), d["kind"], d.get("data") or {}, d.get("created_ms", 0))


# -- handles -------------------------------------------------------------------------------------


def _id(value: str | Thread | Entry, what: str) -> bytes:
    if isinstance(value, (Thread, Entry)):
        return value.id.encode()
    return text_arg(value, what)


@contextmanager
def _maybe(ws: Workspace | None) -> Iterator[Any]:
    """Borrows an optional workspace's pointer (NULL for None)."""
    if ws is None:
        yield ffi.NULL
    else:
        with ws._use() as p:
            yield p


class Run(Managed):
    """A run of a thread held by this process: a lease (renew it with :meth:`heartbeat`),
    tool calls, and the run's checkpoint policy.

    ``with threads.begin_run("chat") as run:`` ends the run on exit. ``close()`` only frees
    the handle: the run goes on until :meth:`end`, or until its lease runs out. A forced
    rewind interrupts a run: its next :meth:`heartbeat` raises
    :class:`~cairn.RunInterruptedError`.
    """

    _free = lib.cairn_run_free

    def __init__(self, ptr: Any, threads: Threads, thread_id: str) -> None:
        super().__init__(ptr)
        self.threads = threads
        self.thread_id = thread_id
        self.id: str = bytes_of(lib.cairn_run_id(ptr)).decode()
        self.status: str | None = None
        """The final status once :meth:`end` was called (``"ended"``, ``"interrupted"``)."""

    def __repr__(self) -> str:
        return f"<Run {self.id} of {self.thread_id!r}{' closed' if self.closed else ''}>"

    def heartbeat(self) -> None:
        """Renews the lease. Raises RunInterruptedError when a forced rewind stopped the run."""
        err = ffi.new("cairn_error **")
        with self.threads._use() as t, self._use() as r:
            check(lib.cairn_threads_heartbeat(t, r, err), err)

    def tool_start(self, name: str) -> str:
        """Starts a tool call (rewinds of the workspace wait for it); returns its id."""
        n = text_arg(name, "name")
        with self.threads._use() as t, self._use() as r:
            return call_bytes(lib.cairn_threads_tool_start, t, r, n, len(n)).decode()

    def tool_finish(self, call_id: str) -> None:
        """Finishes a tool call started by :meth:`tool_start`."""
        self.threads._tool_finish(call_id)

    @contextmanager
    def tool(self, name: str) -> Iterator[str]:
        """A tool call as a context manager: ``with run.tool("bash"): ...``."""
        call = self.tool_start(name)
        try:
            yield call
        finally:
            self.tool_finish(call)

    def end(self) -> str:
        """Ends the run; returns its final status (``"ended"``, or ``"interrupted"`` if a
        forced rewind stopped it)."""
        with self.threads._use() as t, self._use() as r:
            self.status = str(call_json(lib.cairn_threads_end_run, t, r))
        return self.status

    def __exit__(self, *exc: object) -> None:
        try:
            if not self.closed and self.status is None and not self.threads.closed:
                self.end()
        finally:
            self.close()


class Threads(Managed):
    """A thread database.

    ``Threads(workspace=ws)`` opens ``<store>/threads.db`` of the workspace and uses ``ws``
    as the default workspace for checkpoints, rewinds and forks; ``Threads(path)`` opens a
    database anywhere. The handle is thread-safe.

    Args:
        path: the database file, or a ``postgres://`` URL (a PostgreSQL database that several
            machines share); ``None`` with a workspace: the workspace store's.
        workspace: the default workspace (also used to finish a rewind a crash interrupted).
        checkpoints: the checkpoint policy (a :class:`CheckpointPolicy`, or ``True`` for the
            default one); without it, no checkpoint is taken before entries.
        rewind_files: whether rewinds restore files by default.
        recover: finish rewinds a crash interrupted (default true).
        busy_timeout: how long to wait for the database's lock (timedelta or seconds).
    """

    _free = lib.cairn_threads_free

    def __init__(
        self,
        path: str | os.PathLike[str] | bytes | None = None,
        *,
        workspace: Workspace | None = None,
        checkpoints: CheckpointPolicy | bool | None = None,
        rewind_files: bool | None = None,
        recover: bool | None = None,
        busy_timeout: _dt.timedelta | float | None = None,
    ) -> None:
        if path is None:
            p = b""
        elif isinstance(path, str) and path.startswith(("postgres://", "postgresql://")):
            p = path.encode()  # a PostgreSQL database, shared by several machines
        else:
            p = os.fsencode(os.path.abspath(os.fspath(path)))
        options = json_arg(
            _options(
                checkpoints=CheckpointPolicy.of(checkpoints),
                rewind_files=rewind_files,
                recover=recover,
                busy_timeout_ms=_opt_millis(busy_timeout),
            )
        )
        out = ffi.new("cairn_threads **")
        err = ffi.new("cairn_error **")
        with _maybe(workspace) as w:
            check(lib.cairn_threads_open(p, len(p), options, len(options), w, out, err), err)
        super().__init__(out[0])
        self.workspace = workspace  # kept alive: the library holds it as the default

    # -- threads and entries -------------------------------------------------------------------

    def create(self, id: str | None = None, *, metadata: dict[str, Any] | None = None) -> Thread:  # noqa: A002
        """Creates a thread (an id is made up when none is given). An id that exists already
        raises ValidationError."""
        doc = json_arg(_options(id=id, metadata=metadata))
        with self._use() as t:
            return Thread.from_json(call_json(lib.cairn_threads_create, t, doc, len(doc)))

    def list(self) -> list[Thread]:
        """Every thread."""
        with self._use() as t:
            return [Thread.from_json(d) for d in call_json(lib.cairn_threads_list, t)]

    def log(self, thread: str | Thread, *, all: bool = False) -> builtins.list[Entry]:  # noqa: A002
        """The entries of the thread's active branch, or with ``all`` of every branch
        (nothing is ever deleted)."""
        th = _id(thread, "thread")
        with self._use() as t:
            return [Entry.from_json(d) for d in call_json(lib.cairn_threads_log, t, th, len(th), bool(all))]

    def append(
        self,
        thread: str | Thread,
        kind: EntryKind,
        content: str | bytes = "",
        *,
        metadata: dict[str, Any] | None = None,
        key: str | None = None,
        wait: _dt.timedelta | float | None = None,
        run: Run | None = None,
        workspace: Workspace | None = None,
    ) -> Appended:
        """Appends an entry (``kind``: ``"user"``, ``"assistant"``, ``"tool"``, ``"note"``,
        ``"event"``, ``"compaction"``; ``content`` text or bytes).

        With the checkpoint policy on, a user entry is preceded by a checkpoint of the
        workspace (the run's, else ``workspace``, else the default one); a checkpoint that
        fails is reported in ``checkpoint_error`` and the entry is saved anyway. Repeating an
        admission ``key`` returns the first entry (``repeated``) and writes nothing.
        """
        doc: dict[str, Any] = {"kind": kind}
        if isinstance(content, bytes):
            doc["payload_hex"] = content.hex()
        else:
            doc["text"] = content
        doc.update(_options(metadata=metadata, key=key, wait_ms=_opt_millis(wait)))
        th = _id(thread, "thread")
        entry = json.dumps(doc).encode()
        with ExitStack() as stack:
            t = stack.enter_context(self._use())
            r = stack.enter_context(run._use()) if run is not None else ffi.NULL
            w = stack.enter_context(_maybe(workspace))
            return Appended.from_json(call_json(lib.cairn_threads_append, t, th, len(th), entry, len(entry), r, w))

    def checkpoint(
        self, thread: str | Thread, label: str, *, run: Run | None = None, workspace: Workspace | None = None
    ) -> Checkpoint:
        """Takes a manual checkpoint of the workspace (the run's, else ``workspace``, else
        the default one), labelled ``label``."""
        th = _id(thread, "thread")
        lb = text_arg(label, "label")
        with ExitStack() as stack:
            t = stack.enter_context(self._use())
            r = stack.enter_context(run._use()) if run is not None else ffi.NULL
            w = stack.enter_context(_maybe(workspace))
            return Checkpoint.from_json(call_json(lib.cairn_threads_checkpoint, t, th, len(th), lb, len(lb), r, w))

    def list_checkpoints(self, thread: str | Thread) -> builtins.list[Checkpoint]:
        """The checkpoints of the thread and of the threads it was forked from."""
        th = _id(thread, "thread")
        with self._use() as t:
            return [Checkpoint.from_json(d) for d in call_json(lib.cairn_threads_list_checkpoints, t, th, len(th))]

    # -- inbox ---------------------------------------------------------------------------------

    def enqueue(
        self, thread: str | Thread, key: str, content: str | bytes = "", *, metadata: dict[str, Any] | None = None
    ) -> Admission:
        """Queues a user prompt under its admission ``key``, delivered at the thread's next
        safe boundary (no run of the thread running or paused, no tool call of its runs open)
        by :meth:`deliver`. A key seen before returns its admission as it is now
        (``repeated``): queued, delivered, or cancelled by a rewind; nothing is queued again.
        Raises ThreadBusyError while a rewind holds the thread."""
        doc: dict[str, Any] = {}
        if isinstance(content, bytes):
            doc["payload_hex"] = content.hex()
        else:
            doc["text"] = content
        doc.update(_options(metadata=metadata))
        th = _id(thread, "thread")
        k = text_arg(key, "key")
        prompt = json.dumps(doc).encode()
        with self._use() as t:
            return Admission.from_json(
                call_json(lib.cairn_threads_enqueue, t, th, len(th), k, len(k), prompt, len(prompt))
            )

    def deliver(
        self,
        thread: str | Thread,
        *,
        run: Run | None = None,
        workspace: Workspace | None = None,
        wait: _dt.timedelta | float | None = None,
    ) -> Delivery:
        """Delivers the oldest queued prompt if the thread is at a safe boundary: the
        checkpoint is taken then (the run's workspace and policy, else ``workspace``, else the
        default one) and the prompt is appended as a user entry under its key. ``run``: a run
        delivering between its own turns (it does not count as under way). Under way, nothing
        is delivered and ``waiting`` says why. A checkpoint that fails leaves the prompt queued
        (with its ``error``) and raises."""
        th = _id(thread, "thread")
        doc = json_arg(_options(wait_ms=_opt_millis(wait)))
        with ExitStack() as stack:
            t = stack.enter_context(self._use())
            r = stack.enter_context(run._use()) if run is not None else ffi.NULL
            w = stack.enter_context(_maybe(workspace))
            return Delivery.from_json(call_json(lib.cairn_threads_deliver, t, th, len(th), doc, len(doc), r, w))

    def inbox(self, thread: str | Thread) -> builtins.list[Admission]:
        """Every admission of the thread's inbox, oldest first: queued, delivered, cancelled."""
        th = _id(thread, "thread")
        with self._use() as t:
            return [Admission.from_json(d) for d in call_json(lib.cairn_threads_inbox, t, th, len(th))]

    # -- memory --------------------------------------------------------------------------------

    def add_memory(
        self,
        thread: str | Thread,
        text: str,
        *,
        kind: Literal["item", "summary"] = "item",
        stands_on: Iterable[str | Entry] = (),
    ) -> MemoryItem:
        """Adds a memory item that stands on some entries: a rewind that cuts one of them
        makes it stale."""
        th = _id(thread, "thread")
        doc = json.dumps(
            {"kind": kind, "text": text, "stands_on": [e.id if isinstance(e, Entry) else e for e in stands_on]}
        ).encode()
        with self._use() as t:
            return MemoryItem.from_json(call_json(lib.cairn_threads_add_memory, t, th, len(th), doc, len(doc)))

    def memory(self, thread: str | Thread) -> builtins.list[MemoryItem]:
        """The memory items seen from the thread's active branch."""
        th = _id(thread, "thread")
        with self._use() as t:
            return [MemoryItem.from_json(d) for d in call_json(lib.cairn_threads_memory, t, th, len(th))]

    # -- runs ----------------------------------------------------------------------------------

    def begin_run(
        self,
        thread: str | Thread,
        *,
        workspace: Workspace | None = None,
        durable: bool = False,
        lease: _dt.timedelta | float | None = None,
        parent_run: str | Run | None = None,
        checkpoints: CheckpointPolicy | bool | None = None,
        agent_checkpoints: CheckpointPolicy | bool | None = None,
        reject_if_busy: bool = False,
        wait: _dt.timedelta | float | None = None,
    ) -> Run:
        """Begins a run of the thread in ``workspace`` (default: the handle's).

        While a rewind holds the thread the call waits (up to ``wait``), or raises
        ThreadBusyError with ``reject_if_busy``. A run with ``parent_run`` is a subagent's
        and takes no checkpoints.
        """
        th = _id(thread, "thread")
        doc = json_arg(
            _options(
                durable=durable or None,
                lease_ms=_opt_millis(lease),
                parent_run=parent_run.id if isinstance(parent_run, Run) else parent_run,
                checkpoints=CheckpointPolicy.of(checkpoints),
                agent_checkpoints=CheckpointPolicy.of(agent_checkpoints),
                reject_if_busy=reject_if_busy or None,
                wait_ms=_opt_millis(wait),
            )
        )
        out = ffi.new("cairn_run **")
        err = ffi.new("cairn_error **")
        with self._use() as t, _maybe(workspace) as w:
            check(lib.cairn_threads_begin_run(t, th, len(th), doc, len(doc), w, out, err), err)
        return Run(out[0], self, th.decode())

    def runs(self, thread: str | Thread) -> ThreadRuns:
        """The thread's runs: going, paused, durable."""
        th = _id(thread, "thread")
        with self._use() as t:
            return ThreadRuns.from_json(call_json(lib.cairn_threads_runs, t, th, len(th)))

    def _tool_finish(self, call_id: str) -> None:
        c = text_arg(call_id, "call")
        err = ffi.new("cairn_error **")
        with self._use() as t:
            check(lib.cairn_threads_tool_finish(t, c, len(c), err), err)

    # -- rewind and fork -----------------------------------------------------------------------

    def _rewind(
        self,
        fn: Any,
        thread: str | Thread,
        entry: str | Entry,
        files: bool | None,
        memory: bool | None,
        dry_run: bool,
        force: bool,
        key: str | None,
        tool_settle: _dt.timedelta | float | None,
        lease_wait: _dt.timedelta | float | None,
        from_run: str | Run | None,
        workspace: Workspace | None,
        paths: Iterable[str | os.PathLike[str]] | None = None,
        on_drift: Literal["refuse", "keep", "overwrite"] | None = None,
        continuation: dict[str, Any] | None = None,
    ) -> RewindReport:
        th, en = _id(thread, "thread"), _id(entry, "entry")
        doc = json_arg(
            _options(
                files=files,
                memory=memory,
                dry_run=dry_run or None,
                force=force or None,
                key=key,
                tool_settle_ms=_opt_millis(tool_settle),
                lease_wait_ms=_opt_millis(lease_wait),
                from_run=from_run.id if isinstance(from_run, Run) else from_run,
                paths=[os.fspath(p) for p in paths] if paths is not None else None,
                on_drift=on_drift,
                continuation=(
                    {"data": continuation.get("data"), "names": list(continuation.get("names", []))}
                    if continuation is not None
                    else None
                ),
            )
        )
        with self._use() as t, _maybe(workspace) as w:
            return RewindReport.from_json(call_json(fn, t, th, len(th), en, len(en), doc, len(doc), w))

    def rewind(
        self,
        thread: str | Thread,
        entry: str | Entry,
        *,
        files: bool | None = None,
        memory: bool | None = None,
        dry_run: bool = False,
        force: bool = False,
        key: str | None = None,
        tool_settle: _dt.timedelta | float | None = None,
        lease_wait: _dt.timedelta | float | None = None,
        from_run: str | Run | None = None,
        workspace: Workspace | None = None,
        paths: Iterable[str | os.PathLike[str]] | None = None,
        on_drift: Literal["refuse", "keep", "overwrite"] | None = None,
        continuation: dict[str, Any] | None = None,
    ) -> RewindReport:
        """Rewinds the thread to ``entry`` of its active branch, in one operation: files
        (with ``files=True``) from the checkpoint at or before it, then conversation, memory
        and runs. Nothing is deleted: the cut entries stay on another branch. ``entry`` may
        be a checkpoint id instead (``files.before_rewind_checkpoint_id`` of an earlier
        rewind, say): the rewind goes to the checkpoint's point, on whatever branch, and
        with ``memory=False`` restores its files only.

        Without ``force``, a going run of the thread raises ThreadBusyError and, with files,
        one of another thread in the same workspace raises WorkspaceBusyError; with
        ``force`` this process's runs are interrupted (RunInterruptedError at their next
        heartbeat). ``key`` makes the rewind idempotent.

        With files, ``paths`` restores only those files and directories (relative to the
        root), and ``on_drift`` checks for files edited since the thread's newest checkpoint
        (after the one restored) by someone else: ``"refuse"`` (ConflictError), ``"keep"``
        them or ``"overwrite"`` them. Default: no check.

        ``continuation`` (``{"data": ..., "names": [...]}``) is an agent's half of the rewind,
        kept with it before the files change: ``data`` comes back in the report's
        ``continuation``, and the thread is found by each of ``names`` once the rewind is
        done. A thread Claude Code's hooks wrote gets Claude's without it.
        """
        return self._rewind(
            lib.cairn_threads_rewind,
            thread,
            entry,
            files,
            memory,
            dry_run,
            force,
            key,
            tool_settle,
            lease_wait,
            from_run,
            workspace,
            paths=paths,
            on_drift=on_drift,
            continuation=continuation,
        )

    def restore_before(
        self,
        thread: str | Thread,
        entry: str | Entry,
        *,
        files: bool | None = None,
        memory: bool | None = None,
        dry_run: bool = False,
        force: bool = False,
        key: str | None = None,
        tool_settle: _dt.timedelta | float | None = None,
        lease_wait: _dt.timedelta | float | None = None,
        from_run: str | Run | None = None,
        workspace: Workspace | None = None,
        paths: Iterable[str | os.PathLike[str]] | None = None,
        on_drift: Literal["refuse", "keep", "overwrite"] | None = None,
        continuation: dict[str, Any] | None = None,
    ) -> RewindReport:
        """"Restore before this prompt": the rewind to just before user entry ``entry``,
        with the checkpoint taken right before it. Options as for :meth:`rewind`, ``paths``
        and ``on_drift`` included."""
        return self._rewind(
            lib.cairn_threads_restore_before,
            thread,
            entry,
            files,
            memory,
            dry_run,
            force,
            key,
            tool_settle,
            lease_wait,
            from_run,
            workspace,
            paths=paths,
            on_drift=on_drift,
            continuation=continuation,
        )

    def fork(
        self,
        thread: str | Thread,
        entry: str | Entry,
        *,
        files: bool = False,
        new_thread_id: str | None = None,
        dry_run: bool = False,
        force: bool = False,
        replace: bool = False,
        tool_settle: _dt.timedelta | float | None = None,
        lease_wait: _dt.timedelta | float | None = None,
        metadata: dict[str, Any] | None = None,
        workspace: Workspace | None = None,
        source: Workspace | None = None,
        source_workspace_id: str | None = None,
    ) -> ForkReport:
        """Forks the thread at ``entry``: a new thread sharing the prefix. With
        ``files=True`` the fork's ``workspace`` gets the files as they were there
        (checkpoints are copied from ``source``'s store first when it is another one).

        ``source_workspace_id`` (instead of ``source``) names a workspace of another machine
        whose checkpoints the files come from: they are read through ``workspace``'s store,
        the cache of the remote that machine snapshots into (``Workspace(..., remote=url)``),
        the thread database (``postgres://``) being shared too.

        A ``workspace`` that holds the source workspace, its store or the thread database is
        refused with ``DeniedError``, as is one that is not empty and no workspace of the
        thread's family unless ``replace=True`` says to replace its contents."""
        th, en = _id(thread, "thread"), _id(entry, "entry")
        doc = json_arg(
            _options(
                files=files or None,
                new_thread_id=new_thread_id,
                dry_run=dry_run or None,
                force=force or None,
                replace=replace or None,
                tool_settle_ms=_opt_millis(tool_settle),
                lease_wait_ms=_opt_millis(lease_wait),
                metadata=metadata,
                source_workspace_id=source_workspace_id,
            )
        )
        with self._use() as t, _maybe(workspace) as w, _maybe(source) as s:
            return ForkReport.from_json(call_json(lib.cairn_threads_fork, t, th, len(th), en, len(en), doc, len(doc), w, s))

    # -- events --------------------------------------------------------------------------------

    def events(self, cursor: int = 0, limit: int = 0) -> builtins.list[Event]:
        """Events after ``cursor`` (0: from the start), at most ``limit`` (0: 1000). Two
        processes see the same events."""
        with self._use() as t:
            return [Event.from_json(d) for d in call_json(lib.cairn_threads_events, t, cursor, limit)]
