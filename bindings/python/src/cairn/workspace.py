"""Workspaces, holds, cancel tokens and progress callbacks: the idiomatic layer over
``cairn_workspace_*``."""

from __future__ import annotations

import builtins
import datetime as _dt
import json
import os
import threading
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import replace
from typing import Any, Literal

from ._ffi import ffi, lib
from ._handle import Managed, call_bytes, call_json, check, json_arg, text_arg
from .types import (
    CacheTrim,
    Change,
    CopyReport,
    GcReport,
    Progress,
    PruneReport,
    Recovery,
    RemoteOptions,
    RestorePlan,
    RestoreReport,
    Retention,
    SnapshotInfo,
    VerifyReport,
    WatchStatus,
    WorkspaceInfo,
    millis,
)

__all__ = ["Workspace", "Hold", "CancelToken", "ProgressCallback", "DriftPolicy"]

#: A progress callback: called with a :class:`Progress` about every 50 ms, on the thread that
#: made the call. Returning ``False`` stops the operation with AbortedByCallbackError; raising
#: stops it too, and the exception propagates from the call.
ProgressCallback = Callable[[Progress], "bool | None"]

#: What a restore does with paths edited since its reference snapshot.
DriftPolicy = Literal["overwrite", "refuse", "keep", "skip"]

def _options(**fields: Any) -> dict[str, Any]:
    """An options document of the fields that are set (``None`` means the default)."""
    return {k: v for k, v in fields.items() if v is not None}


def _name(value: str | SnapshotInfo, what: str = "snapshot") -> bytes:
    """A snapshot named by id, unique prefix, label, or a SnapshotInfo."""
    if isinstance(value, SnapshotInfo):
        return value.id.encode()
    return text_arg(value, what)


class CancelToken(Managed):
    """A token that cancels the operations it is given, from any thread.

    ``cancel()`` may be called from any thread, any number of times; an operation given the
    token (``cancel=token``) stops at its next check with :class:`~cairn.CancelledError` and
    records nothing. A token stays cancelled: make a new one for the next operation.
    """

    _free = lib.cairn_cancel_free

    def __init__(self) -> None:
        out = ffi.new("cairn_cancel **")
        err = ffi.new("cairn_error **")
        check(lib.cairn_cancel_new(out, err), err)
        super().__init__(out[0])
        self._cancelled = False

    def cancel(self) -> None:
        """Cancels every operation using this token. Safe from any thread."""
        with self._use() as ptr:
            self._cancelled = True
            check(lib.cairn_cancel_cancel(ptr), None)

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._cancelled


class Hold(Managed):
    """A hold on a workspace: while it stands, restores are refused with
    :class:`~cairn.BusyError`. ``release()`` (or ``close()``, or leaving a ``with`` block)
    lets them go again."""

    _free = lib.cairn_hold_free

    def __init__(self, ptr: Any, workspace: Workspace, what: str) -> None:
        super().__init__(ptr)
        self.workspace = workspace
        self.what = what

    def release(self) -> None:
        """Releases the hold (the same as ``close()``)."""
        self.close()

    def __repr__(self) -> str:
        return f"<Hold {self.what!r} {'released' if self.closed else 'held'}>"


class _ProgressCall:
    """The state of one call with a progress callback: the user's callable, and the
    exception it raised (stored by the trampoline, re-raised after the C call returns)."""

    __slots__ = ("fn", "error", "stopped")

    def __init__(self, fn: ProgressCallback | None) -> None:
        self.fn = fn
        self.error: BaseException | None = None
        self.stopped = False

    def deliver(self, p: Any) -> int:
        # The library may report once more while the walk winds down after a stop: the
        # user's callable is not called again.
        if self.stopped:
            return 1
        try:
            if self.fn is not None and self.fn(Progress(p.files, p.dirs, p.hashed, p.hashed_bytes)) is False:
                self.stopped = True
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt too: stop, then re-raise
            self.error = e
            self.stopped = True
        return 1 if self.stopped else 0


# The call running on each thread, for the trampoline's error path: an exception raised
# outside `deliver`'s try (a KeyboardInterrupt delivered as the trampoline starts) reaches
# cffi's onerror hook, which has no userdata.
_running = threading.local()


def _trampoline_error(exc_type: Any, exc_value: BaseException | None, tb: Any) -> int:
    state: _ProgressCall | None = getattr(_running, "call", None)
    if state is not None and state.error is None and exc_value is not None:
        state.error = exc_value.with_traceback(tb)
        state.stopped = True
    return 1


def _trampoline(userdata: Any, progress: Any) -> int:
    # One static trampoline for every call; `userdata` is a handle to that call's state.
    state: _ProgressCall = ffi.from_handle(userdata)
    return state.deliver(progress)


_progress_trampoline: Any = ffi.callback(
    "int32_t(void *, const cairn_progress *)", _trampoline, error=1, onerror=_trampoline_error
)


class Workspace(Managed):
    """A workspace: a root directory and the store that keeps its snapshots.

    ``Workspace(root)`` opens it, creating the store if needed (by default in the user's data
    directory, ``$CAIRN_HOME`` else ``$XDG_DATA_HOME/cairn`` else ``~/.local/share/cairn``,
    outside the workspace, where cleaning the tree cannot reach it), and completes any restore a crash interrupted (see :meth:`info`). The handle is
    thread-safe: several threads may call its methods at once. Close it with ``close()`` or a
    ``with`` block.

    Every method releases the GIL while the library works, so other Python threads run, and
    ``asyncio.to_thread(ws.snapshot)`` keeps an event loop responsive.

    Snapshots are named by id, unique id prefix (4+ hex characters), label, or a
    :class:`SnapshotInfo`.
    """

    _free = lib.cairn_workspace_free

    def __init__(
        self,
        root: str | os.PathLike[str] | bytes,
        *,
        store: str | os.PathLike[str] | None = None,
        id: str | None = None,  # noqa: A002 - the library's name for it
        excludes: Iterable[str] = (),
        max_file_bytes: int | None = None,
        gitignore: bool | None = None,
        refuse_hard_links: bool | None = None,
        retain: Retention | None = None,
        gc_grace: _dt.timedelta | float | None = None,
        recover: bool | None = None,
        remote: str | None = None,
        remote_options: RemoteOptions | dict[str, Any] | None = None,
    ) -> None:
        """Opens the workspace at ``root``.

        Args:
            root: the workspace directory (must exist).
            store: where snapshots are kept (default: ``$CAIRN_STORE``, else a
                ``<root>/.cairn`` an earlier version made, else the workspace's store in the
                data directory); shared stores hold several workspaces.
            id: the workspace's id in the store (default: derived from the root).
            excludes: globs left out of every snapshot, on top of ``.git``,
                ``node_modules`` and ``.cairn``.
            max_file_bytes: files larger than this are skipped (default 10 MiB).
            gitignore: honour ``.gitignore`` and ``.cairnignore`` (default true).
            refuse_hard_links: skip files with several hard links.
            retain: a retention applied after each snapshot.
            gc_grace: how long unreachable objects are kept (timedelta or seconds).
            recover: complete restores a crash interrupted (default true).
            remote: a remote object store that holds the snapshots (``s3://bucket/prefix``,
                ``gs://bucket/prefix``, ``az://container/prefix``, ``file:///path``); ``store``
                is then this machine's cache of it. Machines sharing the remote see each
                other's snapshots.
            remote_options: how the remote is reached (a :class:`RemoteOptions`, or a dict
                of its JSON fields); unset fields come from the ``AWS_*`` variables. An
                unreachable endpoint raises CairnIOError, refused keys DeniedError, within
                seconds; messages name the URL, never a key.
        """
        opts = _options(
            # Absolute, so the store stays the same whatever the current directory later is.
            store=None if store is None else os.path.abspath(os.fsdecode(os.fspath(store))),
            id=id,
            excludes=list(excludes) or None,
            max_file_bytes=max_file_bytes,
            gitignore=gitignore,
            refuse_hard_links=refuse_hard_links,
            retain=None if retain is None else retain.to_json(),
            gc_grace_ms=None if gc_grace is None else millis(gc_grace),
            recover=recover,
            remote=remote,
            remote_options=remote_options.to_json() if isinstance(remote_options, RemoteOptions) else remote_options,
        )
        root_bytes = os.fsencode(os.fspath(root))
        options = json_arg(opts)
        out = ffi.new("cairn_workspace **")
        err = ffi.new("cairn_error **")
        check(lib.cairn_workspace_open(root_bytes, len(root_bytes), options, len(options), out, err), err)
        super().__init__(out[0])
        self._root = os.fsdecode(root_bytes)

    @classmethod
    def open(cls, root: str | os.PathLike[str] | bytes, **options: Any) -> Workspace:
        """Opens a workspace: the same as ``Workspace(root, **options)``."""
        return cls(root, **options)

    def __repr__(self) -> str:
        return f"<Workspace {self._root!r}{' closed' if self.closed else ''}>"

    # -- snapshots ----------------------------------------------------------------------------

    def info(self) -> WorkspaceInfo:
        """The workspace's id, root and store, and the restores opening it completed."""
        with self._use() as ws:
            return WorkspaceInfo.from_json(call_json(lib.cairn_workspace_info, ws))

    def snapshot(
        self,
        label: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        excludes: Iterable[str] = (),
        max_file_bytes: int | None = None,
        gitignore: bool | None = None,
        refuse_hard_links: bool | None = None,
        protect: bool = False,
        use_stat_cache: bool | None = None,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> SnapshotInfo:
        """Takes a snapshot of the workspace.

        Args:
            label: a name for people; snapshots can be named by it.
            metadata: a JSON object stored with the snapshot.
            excludes: globs left out of this snapshot, on top of the workspace's.
            max_file_bytes, gitignore, refuse_hard_links: override the workspace's settings.
            protect: retention never drops a protected snapshot.
            use_stat_cache: trust size and mtime to skip re-reading files (default true).
            progress: called with a :class:`Progress` about every 50 ms on this thread.
                Return ``False`` to stop (AbortedByCallbackError); an exception it raises
                stops the snapshot and is re-raised here. Nothing is recorded either way.
            cancel: a :class:`CancelToken`; cancelling it stops the snapshot with
                CancelledError.

        Files that could not be captured are listed in ``skipped``, not raised.
        """
        opts = _options(
            label=label,
            metadata=metadata or None,
            excludes=list(excludes) or None,
            max_file_bytes=max_file_bytes,
            gitignore=gitignore,
            refuse_hard_links=refuse_hard_links,
            protect=protect or None,
            use_stat_cache=use_stat_cache,
        )
        options = json_arg(opts)
        # The trampoline always runs, even without a user callback: it gives Python a chance
        # to deliver Ctrl-C (KeyboardInterrupt) during a long snapshot.
        state = _ProgressCall(progress)
        handle = ffi.new_handle(state)  # kept alive by this frame for the whole call
        outer = getattr(_running, "call", None)  # a callback may snapshot another workspace
        _running.call = state
        with ExitStack() as stack:
            ws = stack.enter_context(self._use())
            c = stack.enter_context(cancel._use()) if cancel is not None else ffi.NULL
            try:
                doc = call_json(lib.cairn_workspace_snapshot, ws, options, len(options), _progress_trampoline, handle, c)
            except BaseException:
                if state.error is not None:
                    error, state.error = state.error, None
                    raise error from None
                raise
            finally:
                _running.call = outer
        if state.error is not None:  # raised after the walk could still stop it: report it anyway
            error, state.error = state.error, None
            raise error
        return SnapshotInfo.from_json(doc)

    def list(self) -> builtins.list[SnapshotInfo]:
        """Every snapshot in the workspace's store, oldest first."""
        with self._use() as ws:
            return [SnapshotInfo.from_json(d) for d in call_json(lib.cairn_workspace_list, ws)]

    def show(self, name: str | SnapshotInfo) -> SnapshotInfo:
        """One snapshot, by id, unique prefix or label. Raises NotFoundError."""
        n = _name(name)
        with self._use() as ws:
            return SnapshotInfo.from_json(call_json(lib.cairn_workspace_show, ws, n, len(n)))

    def diff(
        self, a: str | SnapshotInfo, b: str | SnapshotInfo | None = None, *, attribute: bool = False
    ) -> builtins.list[Change]:
        """What changed from snapshot ``a`` to snapshot ``b``, or to the live files when
        ``b`` is ``None``.

        With ``attribute=True`` each change's ``attribution`` lists the checkpoint intervals
        it changed in (cut by the snapshots taken between ``a`` and ``b``), oldest first, with
        the tool call or subagent whose checkpoint opened each (a shell command is the Bash
        call that ran it); without, ``attribution`` is ``None``."""
        na = _name(a)
        nb = b"" if b is None else _name(b)
        opts = json_arg({"attribute": True}) if attribute else b""
        with self._use() as ws:
            docs = call_json(lib.cairn_workspace_diff_with, ws, na, len(na), nb, len(nb), opts, len(opts))
            return [Change.from_json(c) for c in docs]

    # -- watching -----------------------------------------------------------------------------

    def watch(self, *, max_watches: int | None = None) -> WatchStatus:
        """Starts a watcher of the workspace inside this process (inotify on every directory):
        from then on each :meth:`snapshot` of this handle lists only the directories that
        changed since the one before, and says so in its ``walk`` (the first after the watcher
        starts walks in full). Events are read when a snapshot asks: nothing to wait for.
        Replaces a watcher started before; :meth:`unwatch` (or closing the workspace) stops it.

        Args:
            max_watches: watch at most this many directories (those past it are walked by
                every snapshot; listed in ``unwatched``).

        Raises UnsupportedError on a file system inotify cannot watch (NFS, SMB, FUSE):
        snapshots there walk as before.
        """
        doc = json_arg(_options(max_watches=max_watches))
        with self._use() as ws:
            return WatchStatus.from_json(call_json(lib.cairn_workspace_watch, ws, doc, len(doc)))

    def unwatch(self) -> None:
        """Stops the watcher :meth:`watch` started (snapshots walk the whole tree again, or ask
        a ``cairn watch`` daemon). Does nothing when none runs."""
        err = ffi.new("cairn_error **")
        with self._use() as ws:
            check(lib.cairn_workspace_unwatch(ws, err), err)

    # -- store upkeep -------------------------------------------------------------------------

    def delete(self, name: str | SnapshotInfo) -> PruneReport:
        """Deletes one snapshot and collects the garbage it leaves."""
        n = _name(name)
        with self._use() as ws:
            return PruneReport.from_json(call_json(lib.cairn_workspace_delete, ws, n, len(n)))

    def prune(
        self,
        retain: Retention | None = None,
        *,
        count: int | None = None,
        max_age: _dt.timedelta | float | None = None,
        max_total_bytes: int | None = None,
    ) -> PruneReport:
        """Applies a retention (a :class:`Retention`, or its fields as keywords) and
        collects. Protected snapshots are kept."""
        if retain is None:
            retain = Retention(count=count, max_age=max_age, max_total_bytes=max_total_bytes)
        elif count is not None or max_age is not None or max_total_bytes is not None:
            raise TypeError("pass either a Retention or its fields, not both")
        doc = json_arg(retain.to_json())
        with self._use() as ws:
            return PruneReport.from_json(call_json(lib.cairn_workspace_prune, ws, doc, len(doc)))

    def gc(
        self,
        *,
        grace: _dt.timedelta | float | None = None,
        dry_run: bool = False,
        clock_skew: _dt.timedelta | float | None = None,
    ) -> GcReport:
        """Collects garbage: objects no snapshot reaches and older than ``grace``
        (timedelta or seconds; default the workspace's). With ``dry_run``, changes nothing
        and returns the plan (``report.plan``).

        On a workspace with a ``remote``, the remote's collector runs (``report.remote``):
        it marks unreachable objects in one run and deletes them in a later one, ``grace``
        (default an hour) after; ``clock_skew`` is how far the machines' clocks may differ
        (default a minute; only for a remote, else ``InvalidArgument``)."""
        doc = json_arg(
            _options(
                grace_ms=None if grace is None else millis(grace),
                dry_run=dry_run or None,
                clock_skew_ms=None if clock_skew is None else millis(clock_skew),
            )
        )
        with self._use() as ws:
            result = call_json(lib.cairn_workspace_gc, ws, doc, len(doc))
        if "remote" in result:
            return replace(GcReport.from_json(result), dry_run=dry_run)
        return GcReport.from_plan_json(result) if dry_run else GcReport.from_json(result)

    def trim_cache(self, max_bytes: int) -> CacheTrim:
        """Shrinks this machine's cache of the remote to at most ``max_bytes`` of packs and
        large objects, least recently used first (they are downloaded again when next read).
        Files the remote does not hold yet are never removed. Raises UnsupportedError when
        the workspace has no remote."""
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        with self._use() as ws:
            return CacheTrim.from_json(call_json(lib.cairn_workspace_trim_cache, ws, max_bytes))

    def verify(self) -> VerifyReport:
        """Re-hashes every object and decodes every tree and manifest of the store."""
        with self._use() as ws:
            return VerifyReport.from_json(call_json(lib.cairn_workspace_verify, ws))

    def copy(self, name: str | SnapshotInfo, to: Workspace) -> CopyReport:
        """Copies a snapshot with its objects into ``to``'s store (the id stays the same).
        Idempotent."""
        n = _name(name)
        with self._use() as ws, to._use() as target:
            return CopyReport.from_json(call_json(lib.cairn_workspace_copy, ws, n, len(n), target))

    # -- restores -----------------------------------------------------------------------------

    @staticmethod
    def _restore_options(
        dry_run: bool,
        reference: str | SnapshotInfo | None,
        on_drift: DriftPolicy | None,
        key: str | None,
        paths: Iterable[str | os.PathLike[str]] | None = None,
    ) -> bytes:
        opts = _options(
            dry_run=dry_run or None,
            reference=reference.id if isinstance(reference, SnapshotInfo) else reference,
            on_drift=on_drift,
            key=key,
            paths=[os.fspath(p) for p in paths] if paths is not None else None,
        )
        return json_arg(opts)

    def plan(
        self,
        name: str | SnapshotInfo,
        *,
        reference: str | SnapshotInfo | None = None,
        on_drift: DriftPolicy | None = None,
        cancel: CancelToken | None = None,
        paths: Iterable[str | os.PathLike[str]] | None = None,
    ) -> RestorePlan:
        """Plans restoring a snapshot, changing nothing (the dry run): every change, listed.

        Args:
            reference: a snapshot (full id) to compare the current files with; paths the
                restore would change that differ from it are ``drifted``.
            on_drift: ``"overwrite"`` (default; the safety snapshot keeps them),
                ``"refuse"`` (ConflictError) or ``"keep"`` (``"skip"``: the same).
            cancel: a :class:`CancelToken`.
            paths: restore only these files and directories (relative to the root, a
                directory with everything under it); every other path is left as it is.
        """
        n = _name(name)
        opts = self._restore_options(False, reference, on_drift, None, paths)
        with ExitStack() as stack:
            ws = stack.enter_context(self._use())
            c = stack.enter_context(cancel._use()) if cancel is not None else ffi.NULL
            document = call_bytes(lib.cairn_workspace_plan, ws, n, len(n), opts, len(opts), c)
        return RestorePlan.from_json(json.loads(document), document)

    def apply(
        self,
        plan: RestorePlan,
        *,
        on_drift: DriftPolicy | None = None,
        key: str | None = None,
        cancel: CancelToken | None = None,
    ) -> RestoreReport:
        """Carries out a plan from :meth:`plan`, exactly: a safety snapshot first, then the
        listed changes through a journal. If the files changed since the plan was made, the
        library re-checks and refuses rather than guess.

        Args:
            key: an idempotency key: applying with a key that already finished returns the
                earlier report (without its ``safety_walk``: the repeat walked nothing).
        """
        if not isinstance(plan, RestorePlan) or not plan.document:
            raise TypeError("apply() takes a RestorePlan returned by Workspace.plan()")
        opts = self._restore_options(False, None, on_drift, key)
        with ExitStack() as stack:
            ws = stack.enter_context(self._use())
            c = stack.enter_context(cancel._use()) if cancel is not None else ffi.NULL
            doc = call_json(lib.cairn_workspace_apply, ws, plan.document, len(plan.document), opts, len(opts), c)
        return RestoreReport.from_json(doc)

    def restore(
        self,
        name: str | SnapshotInfo,
        *,
        dry_run: bool = False,
        reference: str | SnapshotInfo | None = None,
        on_drift: DriftPolicy | None = None,
        key: str | None = None,
        cancel: CancelToken | None = None,
        paths: Iterable[str | os.PathLike[str]] | None = None,
    ) -> RestoreReport:
        """Restores the workspace's files to a snapshot: plans, then (unless ``dry_run``)
        applies. A safety snapshot of the files is taken first; restoring
        ``report.safety_snapshot_id`` (with the same ``paths``) undoes the restore.
        ``paths`` restores only those files and directories (relative to the root).

        Raises BusyError while a hold stands, ConflictError for drifted files with
        ``on_drift="refuse"``, DeniedError when a path is not safe to change.
        """
        n = _name(name)
        opts = self._restore_options(dry_run, reference, on_drift, key, paths)
        with ExitStack() as stack:
            ws = stack.enter_context(self._use())
            c = stack.enter_context(cancel._use()) if cancel is not None else ffi.NULL
            doc = call_json(lib.cairn_workspace_restore, ws, n, len(n), opts, len(opts), c)
        return RestoreReport.from_json(doc)

    def recover(self) -> builtins.list[Recovery]:
        """Completes restores a crash left pending (opening a workspace does it too), and makes
        the changes of finished restores durable: a restore returns once its changes are made,
        before the disk has them."""
        with self._use() as ws:
            return [Recovery.from_json(r) for r in call_json(lib.cairn_workspace_recover, ws)]

    def give_up(self) -> builtins.list[Recovery]:
        """Finishes what :meth:`recover` can, then ends the interrupted restores it cannot
        finish (paths obstructed by later edits, or that may not be changed) as they stand:
        each comes back with ``abandoned`` true and the paths left as they are; its ``safety``
        snapshot still holds the files as they were before it."""
        with self._use() as ws:
            return [Recovery.from_json(r) for r in call_json(lib.cairn_workspace_give_up, ws)]

    def hold(self, what: str, *, pid: int | None = None) -> Hold:
        """Takes a hold named ``what`` (a command, a run): restores are refused with
        BusyError until it is released. Use it as a context manager::

            with ws.hold("make test"):
                run_tests()

        With ``pid``, the hold also lasts until that process exits.
        """
        w = text_arg(what, "what")
        out = ffi.new("cairn_hold **")
        err = ffi.new("cairn_error **")
        with self._use() as ws:
            check(lib.cairn_workspace_hold(ws, w, len(w), -1 if pid is None else pid, out, err), err)
        return Hold(out[0], self, what)
