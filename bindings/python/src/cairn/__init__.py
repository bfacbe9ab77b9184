"""Cairn: snapshots of an AI agent's workspace, restored safely.

A Python binding to libcairn (the C ABI in ``include/cairn.h``), bundled with the package::

    import cairn

    with cairn.Workspace("/path/to/project") as ws:
        before = ws.snapshot("before the agent's edit")
        ...  # the agent edits files
        for change in ws.diff(before):
            print(change.kind, change.path)
        report = ws.restore(before)          # put the files back
        ws.restore(report.safety_snapshot_id)  # changed your mind: undo the restore

Errors are :class:`CairnError` subclasses (``NotFoundError``, ``BusyError``, ...), one per
C status. Calls release the GIL. See ``bindings/python/README.md``.
"""

from __future__ import annotations

from . import _ffi, errors, threads, types
from ._handle import Managed
from .errors import (
    AbortedByCallbackError,
    BusyError,
    CairnError,
    CairnIOError,
    CancelledError,
    ClosedError,
    ConflictError,
    CorruptError,
    DeniedError,
    InvalidArgumentError,
    NotFoundError,
    NullArgumentError,
    PanicError,
    RunInterruptedError,
    ThreadBusyError,
    UnsupportedError,
    ValidationError,
    WorkspaceBusyError,
    error_class,
)
from .types import (
    Action,
    Attribution,
    BadCopy,
    BrokenIndex,
    CacheTrim,
    CaptureSettings,
    Change,
    CopyReport,
    EntryInfo,
    GcPlan,
    GcReport,
    KeptPath,
    PackPlan,
    Progress,
    PruneReport,
    Recovery,
    RemoteGcReport,
    RemoteOptions,
    RestorePlan,
    RestoreReport,
    Retention,
    SnapshotCheck,
    SnapshotInfo,
    Skipped,
    Stats,
    Unreadable,
    VerifyReport,
    WalkInfo,
    WatchStatus,
    WorkspaceInfo,
)
from .threads import (
    Admission,
    Appended,
    Checkpoint,
    CheckpointFailure,
    CheckpointPolicy,
    CheckpointRef,
    ConversationReport,
    Entry,
    Delivery,
    EntryKind,
    Event,
    FilesReport,
    ForkReport,
    MemoryItem,
    MemoryReport,
    Run,
    RunInfo,
    RunsReport,
    RewindReport,
    Thread,
    ThreadRuns,
    Threads,
)
from .workspace import CancelToken, DriftPolicy, Hold, ProgressCallback, Workspace

#: The ABI version this package was written for (checked against the library on import).
ABI_VERSION: int = _ffi.ABI_VERSION


def library_version() -> str:
    """The version of the loaded libcairn (``cairn_version()``)."""
    return _ffi.c_string(_ffi.lib.cairn_version())


__version__: str = library_version()

__all__ = [
    "ABI_VERSION",
    "library_version",
    "Managed",
    "Workspace",
    "Hold",
    "CancelToken",
    "ProgressCallback",
    "DriftPolicy",
    *types.__all__,
    *threads.__all__,
    *errors.__all__,
]
