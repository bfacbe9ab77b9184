"""A LangGraph checkpoint saver whose graph checkpoints carry the workspace's files (issue 60).

``CairnSaver(workspace)`` keeps LangGraph's checkpoints and pending writes in Cairn's thread
database (SQLite in the workspace's store by default, or the ``postgres://`` database of a
fleet), and binds each graph checkpoint to a Cairn checkpoint: a snapshot of the workspace
taken when LangGraph writes it. Replaying or forking a graph from an earlier checkpoint can
then put the files back as they were there, with :meth:`CairnSaver.restore_files` (a dry run
first, the drift rule, a safety snapshot, as every Cairn restore)::

    from cairn.langgraph import CairnSaver

    with cairn.Workspace(root) as ws, CairnSaver(ws) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke(inputs, config, durability="sync")
        earlier = list(saver.list(config))[-2].config
        saver.restore_files(earlier)          # the files of that checkpoint
        graph.invoke(None, earlier, durability="sync")

How it maps: one Cairn thread per LangGraph ``(thread_id, checkpoint_ns)`` (id ``lg:…``,
metadata ``{"langgraph": {...}}``); one ``user`` entry per graph checkpoint, its payload the
checkpoint serialized by the saver's ``serde`` (LangGraph's own), its metadata the
checkpoint's metadata, parent and id; Cairn's checkpoint policy snapshots the workspace right
before that entry, so the entry's checkpoint holds the files at the graph checkpoint. Pending
writes are ``event`` entries. Cairn's journal is append-only, so ``delete_thread``,
``delete_for_runs`` and ``prune`` append a deletion entry that hides the checkpoints from the
saver, and give their snapshots back to the store (deleted, their objects collected) unless a
checkpoint still shown by any thread of the database (a ``copy_thread`` fork, another
LangGraph thread, any Cairn thread) needs them. ``copy_thread`` is Cairn's fork, with the files
into another workspace when given one.

Use ``durability="sync"`` (or ``"exit"``) for files that match each checkpoint exactly: with
LangGraph's default ``"async"`` a checkpoint is saved while the next step already runs, so its
snapshot may see that step's first edits.

Needs the ``langgraph`` extra: ``pip install 'cairn[langgraph]'``.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import logging
import os
import random
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cairn.langgraph needs LangGraph's checkpoint package: pip install 'cairn[langgraph]' "
        f"(or pip install langgraph-checkpoint); importing it failed: {e}"
    ) from e

from .errors import NotFoundError, ValidationError
from .threads import CheckpointPolicy, CheckpointRef, Entry, RewindReport, Threads
from .workspace import Workspace

__all__ = ["CairnSaver", "NoFilesError"]

logger = logging.getLogger(__name__)

#: The key of a Cairn thread's metadata that names the LangGraph thread and namespace.
THREAD_KEY = "langgraph"
#: The key of an entry's metadata that says what the entry is to the saver.
ENTRY_KEY = "lg"


class NoFilesError(LookupError):
    """The graph checkpoint has no snapshot of the files (the saver was opened with
    ``files=False``, or taking the snapshot failed when the checkpoint was written)."""


@dataclass
class _Saved:
    """A graph checkpoint as the journal replays it."""

    checkpoint_id: str
    parent_id: str | None
    type: str
    blob: bytes
    metadata: dict[str, Any]
    files: CheckpointRef | None


@dataclass
class _View:
    """One Cairn thread (a LangGraph thread and namespace) replayed: its shown checkpoints and
    their pending writes, keyed ``(task_id, idx)``."""

    cairn_id: str
    thread_id: str
    checkpoint_ns: str
    active_leaf: str | None
    saved: dict[str, _Saved] = field(default_factory=dict)
    writes: dict[str, dict[tuple[str, int], tuple[str, str, int, str, str, bytes]]] = field(default_factory=dict)

    def replay(self, entries: Sequence[Entry]) -> _View:
        for e in sorted(entries, key=lambda e: e.seq):
            what = e.metadata.get(ENTRY_KEY)
            if what == "checkpoint":
                cid = e.metadata["id"]
                self.saved[cid] = _Saved(
                    cid,
                    e.metadata.get("parent"),
                    e.metadata["type"],
                    e.payload,
                    e.metadata.get("md") or {},
                    e.checkpoint,
                )
                self.writes.pop(cid, None)  # written again: its writes start afresh, as in SQL
            elif what == "writes":
                doc = json.loads(e.payload)
                mine = self.writes.setdefault(e.metadata["id"], {})
                for idx, channel, type_, value in doc["writes"]:
                    key = (doc["task_id"], idx)
                    # A special channel's write replaces an earlier one; a regular write is kept
                    # once (LangGraph's INSERT OR REPLACE / INSERT OR IGNORE).
                    if channel in WRITES_IDX_MAP or key not in mine:
                        mine[key] = (doc["task_path"], doc["task_id"], idx, channel, type_, bytes.fromhex(value))
            elif what == "delete":
                ids = e.metadata.get("ids")
                for cid in builtins.list(self.saved) if ids is None else ids:
                    self.saved.pop(cid, None)
                    self.writes.pop(cid, None)
        return self


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]", "-", text)[:48]


class CairnSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpoint saver over Cairn's thread database, each checkpoint bound to a
    snapshot of ``workspace``. Sync and async (the ``a…`` methods run the sync ones in a worker
    thread; libcairn releases the GIL).

    Args:
        workspace: the workspace the graph edits; its files are snapshotted at each checkpoint.
        threads_db: the thread database (a path, or a ``postgres://`` URL); default the
            workspace store's ``threads.db``.
        files: snapshot the workspace at each checkpoint (default true); without, it is a
            plain checkpointer.
        exclude: globs left out of the checkpoints' snapshots, on top of the workspace's.
        release_files: let deleted and pruned checkpoints give their snapshots back to the
            store (default true).
        serde: LangGraph's serializer (default its ``JsonPlusSerializer``).
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        threads_db: str | os.PathLike[str] | None = None,
        files: bool = True,
        exclude: Sequence[str] = (),
        release_files: bool = True,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.workspace = workspace
        if threads_db is None:
            threads_db = os.path.join(workspace.info().store, "threads.db")
        #: Where the thread database is: give it to a saver of another workspace (a fork's).
        self.threads_db: str = threads_db if isinstance(threads_db, str) else os.fspath(threads_db)
        self.files = files
        self.release_files = release_files
        self.threads = Threads(
            self.threads_db,
            workspace=workspace,
            checkpoints=CheckpointPolicy(enabled=files, exclude=tuple(exclude)),
        )
        self._known: set[str] = set()
        self._workspace_id = workspace.info().id

    def close(self) -> None:
        """Closes the saver's thread database handle (not the workspace)."""
        self.threads.close()

    def __enter__(self) -> CairnSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- mapping -------------------------------------------------------------------------------

    @staticmethod
    def cairn_thread_id(thread_id: str, checkpoint_ns: str = "") -> str:
        """The id of the Cairn thread that keeps LangGraph's ``thread_id`` in
        ``checkpoint_ns`` (``cairn log`` shows it)."""
        digest = hashlib.sha256(f"{thread_id}\0{checkpoint_ns}".encode()).hexdigest()[:24]
        return f"lg:{_safe(thread_id)}:{digest}"

    def _ensure(self, thread_id: str, ns: str) -> str:
        cid = self.cairn_thread_id(thread_id, ns)
        if cid not in self._known:
            try:
                self.threads.create(cid, metadata={THREAD_KEY: {"thread_id": thread_id, "checkpoint_ns": ns}})
            except ValidationError:
                pass  # made by another saver or process: the id is the same
            self._known.add(cid)
        return cid

    def _view(self, thread_id: str, ns: str) -> _View | None:
        cid = self.cairn_thread_id(thread_id, ns)
        try:
            entries = self.threads.log(cid, all=True)
        except NotFoundError:
            return None
        return _View(cid, thread_id, ns, entries[-1].id if entries else None).replay(entries)

    def _views(self, thread_id: str | None, others: builtins.list[str] | None = None) -> builtins.list[_View]:
        """Every namespace of ``thread_id`` (of every LangGraph thread when ``None``); the ids
        of the database's other Cairn threads go to ``others`` when given."""
        out = []
        for t in self.threads.list():
            lg = t.metadata.get(THREAD_KEY)
            if not isinstance(lg, dict):
                if others is not None:
                    others.append(t.id)
                continue
            if thread_id is not None and lg.get("thread_id") != thread_id:
                continue
            view = _View(t.id, lg["thread_id"], lg.get("checkpoint_ns", ""), t.active_leaf)
            out.append(view.replay(self.threads.log(t.id, all=True)))
        return out

    def _tuple(self, view: _View, s: _Saved) -> CheckpointTuple:
        conf = {"thread_id": view.thread_id, "checkpoint_ns": view.checkpoint_ns}
        writes = sorted(view.writes.get(s.checkpoint_id, {}).values(), key=lambda w: writes_sort_key(w[0], w[1], w[2]))
        return CheckpointTuple(
            {"configurable": {**conf, "checkpoint_id": s.checkpoint_id}},
            self.serde.loads_typed((s.type, s.blob)),
            s.metadata,
            {"configurable": {**conf, "checkpoint_id": s.parent_id}} if s.parent_id else None,
            [
                (task_id, channel, self.serde.loads_typed((type_, value)))
                for _, task_id, _, channel, type_, value in writes
            ],
        )

    def _find(self, config: RunnableConfig) -> tuple[_View, _Saved] | None:
        conf = config["configurable"]
        view = self._view(str(conf["thread_id"]), conf.get("checkpoint_ns", ""))
        if view is None or not view.saved:
            return None
        cid = get_checkpoint_id(config)
        s = view.saved.get(cid) if cid else view.saved[max(view.saved)]
        return None if s is None else (view, s)

    # -- the contract --------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the thread's newest in
        its namespace), with its pending writes; ``None`` when there is none."""
        found = self._find(config)
        return None if found is None else self._tuple(*found)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (its namespace when given, its
        ``checkpoint_id`` when given; every thread when ``config`` is ``None``), whose metadata
        has every ``filter`` item, older than ``before``, at most ``limit``."""
        conf = (config or {}).get("configurable", {})
        if config is None:
            views = self._views(None)
        elif conf.get("checkpoint_ns") is not None:
            one = self._view(str(conf["thread_id"]), conf["checkpoint_ns"])
            views = [one] if one is not None else []
        else:
            views = self._views(str(conf["thread_id"]))
        only = get_checkpoint_id(config) if config else None
        bound = get_checkpoint_id(before) if before else None
        found = [
            (view, s)
            for view in views
            for s in view.saved.values()
            if (only is None or s.checkpoint_id == only)
            and (bound is None or s.checkpoint_id < bound)
            and all(k in s.metadata and s.metadata[k] == v for k, v in (filter or {}).items())
        ]
        found.sort(key=lambda p: p[1].checkpoint_id, reverse=True)
        for view, s in found[:limit] if limit is not None else found:
            yield self._tuple(view, s)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Saves a checkpoint: an entry of its Cairn thread, a snapshot of the workspace
        taken right before it (with ``files``)."""
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        type_, blob = self.serde.dumps_typed(checkpoint)
        meta = {
            ENTRY_KEY: "checkpoint",
            "id": checkpoint["id"],
            "parent": conf.get("checkpoint_id"),
            "type": type_,
            "md": get_checkpoint_metadata(config, metadata),
        }
        done = self.threads.append(self._ensure(thread_id, ns), "user", blob, metadata=meta, workspace=self.workspace)
        if done.checkpoint_error is not None:
            # The graph checkpoint is saved all the same; only its files cannot come back.
            logger.warning(
                "checkpoint %s of thread %r was saved without its files: %s",
                checkpoint["id"],
                thread_id,
                done.checkpoint_error.message,
            )
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Saves a task's pending writes for the checkpoint ``config`` names (an ``event``
        entry; repeating a ``(task_id, idx)`` keeps the first, except for special channels)."""
        conf = config["configurable"]
        rows = []
        for idx, (channel, value) in enumerate(writes):
            type_, data = self.serde.dumps_typed(value)
            rows.append([WRITES_IDX_MAP.get(channel, idx), channel, type_, data.hex()])
        doc = json.dumps({"task_id": task_id, "task_path": task_path, "writes": rows}).encode()
        cid = self._ensure(str(conf["thread_id"]), conf.get("checkpoint_ns", ""))
        self.threads.append(cid, "event", doc, metadata={ENTRY_KEY: "writes", "id": str(conf["checkpoint_id"])})

    def delete_thread(self, thread_id: str) -> None:
        """Deletes every checkpoint and write of the thread, in every namespace."""
        self._hide({view.cairn_id: (view, None) for view in self._views(str(thread_id))})

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes the checkpoints (and their writes) whose metadata's ``run_id`` is one of
        ``run_ids``, in every thread."""
        runs = set(run_ids)
        if not runs:
            return
        hide = {}
        for view in self._views(None):
            ids = [c for c, s in view.saved.items() if s.metadata.get("run_id") in runs]
            if ids:
                hide[view.cairn_id] = (view, ids)
        self._hide(hide)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keeps only the newest checkpoint of each namespace of each
        thread; ``"delete"``: deletes them all."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        hide = {}
        for thread_id in dict.fromkeys(str(t) for t in thread_ids):
            for view in self._views(thread_id):
                if strategy == "delete":
                    hide[view.cairn_id] = (view, None)
                elif len(view.saved) > 1:
                    newest = max(view.saved)
                    hide[view.cairn_id] = (view, [c for c in view.saved if c != newest])
        self._hide(hide)

    def copy_thread(
        self,
        source_thread_id: str,
        target_thread_id: str,
        *,
        workspace: Workspace | None = None,
        replace: bool = False,
    ) -> None:
        """Copies the thread's checkpoints and writes, every namespace, to
        ``target_thread_id``: a Cairn fork of each of its Cairn threads, sharing their
        entries and snapshots. With ``workspace`` (another workspace) the fork takes the files
        too: that workspace gets the files of the source's newest checkpoint (after a safety
        snapshot; a workspace that is not empty is refused unless ``replace``); open a saver
        on it with ``threads_db=`` this one's to go on there. A target that already has a Cairn
        thread raises ValueError."""
        sources = [v for v in self._views(str(source_thread_id)) if v.active_leaf is not None]
        for view in sources:
            target = self.cairn_thread_id(str(target_thread_id), view.checkpoint_ns)
            try:
                self.threads.log(target)
            except NotFoundError:
                pass
            else:
                raise ValueError(
                    f"thread {target_thread_id!r} (namespace {view.checkpoint_ns!r}) already has Cairn thread "
                    f"{target}; Cairn's journal keeps even deleted checkpoints, so copy into a new thread id"
                )
        for view in sorted(sources, key=lambda v: v.checkpoint_ns):
            with_files = workspace is not None and view.checkpoint_ns == ""
            self.threads.fork(
                view.cairn_id,
                view.active_leaf,  # type: ignore[arg-type]  # filtered above
                new_thread_id=self.cairn_thread_id(str(target_thread_id), view.checkpoint_ns),
                metadata={THREAD_KEY: {"thread_id": str(target_thread_id), "checkpoint_ns": view.checkpoint_ns}},
                files=with_files,
                workspace=workspace if with_files else None,
                replace=replace,
            )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """LangGraph's string versions (as its SQLite saver): a counter and a random tail."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # -- files ---------------------------------------------------------------------------------

    def restore_files(
        self,
        config: RunnableConfig,
        *,
        dry_run: bool = False,
        on_drift: Literal["refuse", "keep", "overwrite"] | None = None,
        paths: Sequence[str | os.PathLike[str]] | None = None,
        force: bool = False,
    ) -> RewindReport:
        """Puts the workspace's files back as they were at the graph checkpoint ``config``
        names (its newest without a ``checkpoint_id``): Cairn's files-only rewind to the
        checkpoint's snapshot, the graph's history untouched.

        ``dry_run`` says what would change (``report.files.restore``) and changes nothing.
        ``on_drift`` checks for files edited since the thread's newest checkpoint by someone
        else: ``"refuse"`` (ConflictError), ``"keep"`` or ``"overwrite"`` them. The restore
        takes a safety snapshot first (``report.files.safety_snapshot_id``; its "Before
        rewind" checkpoint undoes it). ``paths`` restores only those. Raises
        :class:`NoFilesError` when the checkpoint has no snapshot, LookupError when there is
        no such checkpoint."""
        found = self._find(config)
        if found is None:
            raise LookupError(f"no checkpoint of thread {config['configurable'].get('thread_id')!r} for {config}")
        view, s = found
        if s.files is None:
            raise NoFilesError(
                f"checkpoint {s.checkpoint_id} of thread {view.thread_id!r} has no snapshot of the files "
                "(saved with files=False, or its snapshot failed)"
            )
        return self.threads.rewind(
            view.cairn_id,
            s.files.checkpoint_id,
            files=True,
            memory=False,
            dry_run=dry_run,
            on_drift=on_drift,
            paths=paths,
            force=force,
            workspace=self.workspace,
        )

    def _hide(self, hide: dict[str, tuple[_View, builtins.list[str] | None]]) -> None:
        """Appends a deletion entry to each Cairn thread (``None``: all its checkpoints), then
        gives back the snapshots no shown checkpoint of any thread needs."""
        freed: set[str] = set()
        for cid, (view, ids) in hide.items():
            gone = builtins.list(view.saved) if ids is None else ids
            meta: dict[str, Any] = {ENTRY_KEY: "delete"}
            if ids is not None:
                meta["ids"] = ids
            self.threads.append(cid, "event", b"", metadata=meta)
            freed |= {
                s.files.snapshot_id
                for c in gone
                if (s := view.saved.get(c)) is not None
                and s.files is not None
                and s.files.workspace_id == self._workspace_id
            }
        if freed and self.release_files:
            self._release(freed)

    def _release(self, candidates: set[str]) -> None:
        others: builtins.list[str] = []
        needed = {s.files.snapshot_id for v in self._views(None, others) for s in v.saved.values() if s.files}
        for t in others:
            needed |= {c.snapshot_id for c in self.threads.list_checkpoints(t)}
        for snapshot in sorted(candidates - needed):
            try:
                self.workspace.delete(snapshot)
            except NotFoundError:
                pass  # pruned by the workspace's retention already

    # -- async ---------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` in a worker thread."""
        found = await asyncio.to_thread(
            lambda: builtins.list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for tup in found:
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str, **kwargs: Any) -> None:
        """:meth:`copy_thread` in a worker thread."""
        await asyncio.to_thread(lambda: self.copy_thread(source_thread_id, target_thread_id, **kwargs))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` in a worker thread."""
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def arestore_files(self, config: RunnableConfig, **kwargs: Any) -> RewindReport:
        """:meth:`restore_files` in a worker thread."""
        return await asyncio.to_thread(lambda: self.restore_files(config, **kwargs))
