"""Result types: dataclasses built from the library's JSON documents.

Paths are ``str``. The library sends a path as a JSON string when it is UTF-8 and as
``{"hex": "..."}`` otherwise; both become ``os.fsdecode`` of the raw bytes, so a name that is
not UTF-8 (``b"caf\\xe9.txt"``) comes back as ``"caf\\udce9.txt"`` and ``os.fsencode`` gives
the original bytes again. Ids are 64 lowercase hex characters.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Progress",
    "Stats",
    "Skipped",
    "KeptPath",
    "SnapshotInfo",
    "EntryInfo",
    "Change",
    "Attribution",
    "CaptureSettings",
    "Action",
    "RestorePlan",
    "RestoreReport",
    "Recovery",
    "WorkspaceInfo",
    "Retention",
    "Unreadable",
    "PackPlan",
    "GcPlan",
    "GcReport",
    "PruneReport",
    "BadCopy",
    "BrokenIndex",
    "SnapshotCheck",
    "VerifyReport",
    "CopyReport",
    "RemoteOptions",
    "RemoteGcReport",
    "CacheTrim",
    "WalkInfo",
    "WatchStatus",
]


def decode_path(value: Any) -> str:
    """A JSON path (a string, or ``{"hex": ...}`` for bytes that are not UTF-8) as a ``str``."""
    if isinstance(value, dict):
        return os.fsdecode(bytes.fromhex(value["hex"]))
    # A UTF-8 string: go through the bytes so the result is os.fsdecode's whatever the
    # filesystem encoding is.
    return os.fsdecode(value.encode("utf-8", "surrogateescape"))


def _paths(values: list[Any]) -> list[str]:
    return [decode_path(v) for v in values]


def _opt_path(value: Any) -> str | None:
    return None if value is None else decode_path(value)


@dataclass(frozen=True)
class Progress:
    """Progress of a snapshot, passed to a progress callback about every 50 ms."""

    files: int
    """Files recorded so far."""
    dirs: int
    """Directories entered so far."""
    hashed: int
    """Files read so far."""
    hashed_bytes: int
    """Bytes read so far."""


@dataclass(frozen=True)
class Stats:
    """What taking a snapshot cost."""

    files: int
    dirs: int
    symlinks: int
    bytes: int
    hashed: int
    """Files read and hashed."""
    reused: int
    """Files taken from the stat cache without being read."""
    stored_bytes: int
    """New bytes written to the store (after compression)."""
    stored_objects: int
    duration_ms: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Stats:
        return cls(**{k: d.get(k, 0) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Skipped:
    """A path a snapshot left out: ``reason`` is ``"too-large"``, ``"changing"``,
    ``"unreadable"``, ``"hard-link"`` or ``"staged"`` (a file a restore staged)."""

    path: str
    reason: str
    is_dir: bool

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Skipped:
        return cls(decode_path(d["path"]), d["reason"], bool(d.get("is_dir", False)))


@dataclass(frozen=True)
class KeptPath:
    """A path left as it is, and why.

    In a snapshot's ``kept`` the reason is ``"default"``, ``"glob"``, ``"ignored"`` or
    ``"special"`` and ``is_dir`` is known; in a restore's it is ``"excluded"``,
    ``"excluded-by-glob"``, ``"ignored"``, ``"special"``, ``"skipped-by-snapshot"``,
    ``"unreadable"``, ``"too-large"``, ``"changing"``, ``"hard-link"``, ``"holds-kept"``,
    ``"drifted"`` or ``"staged"`` and ``is_dir`` is ``None``.
    """

    path: str
    reason: str
    is_dir: bool | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KeptPath:
        return cls(decode_path(d["path"]), d["reason"], d.get("is_dir"))


@dataclass(frozen=True)
class WalkInfo:
    """What a snapshot walked, and why: ``walked`` is ``"full"`` (every directory: no watcher,
    or one that could not vouch for what changed), ``"partial"`` (only the directories a
    watcher said changed) or ``"none"`` (the watcher said nothing changed)."""

    walked: str
    reason: str | None
    """Why it walked what it did, when a watcher was asked and the walk was not the least it
    could be (no earlier snapshot with this watcher, an overflow, a watch limit, ...)."""
    listed: int
    """Directories it listed, every entry looked at."""
    named: int = 0
    """Directories of which it looked only at the entries the watcher named as changed."""
    ahead_ms: int | None = None
    """Set when a ``cairn watch`` daemon had walked it ahead, once the workspace was quiet,
    and nothing changed since: how many milliseconds before it was asked for (the other
    figures are that walk's)."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WalkInfo:
        return cls(
            d["walked"],
            d.get("reason"),
            d.get("listed", 0),
            d.get("named", 0),
            d.get("ahead_ms"),
        )


@dataclass(frozen=True)
class WatchStatus:
    """What a watcher started by :meth:`Workspace.watch` says of itself."""

    root: str
    """The workspace root watched."""
    watches: int
    """Directories watched."""
    unwatched: list[str]
    """Subtrees not watched (walked by every snapshot), and why."""
    changed: int
    """Directories remembered as changed."""
    overflows: int
    """Times the kernel's event queue overflowed (the next snapshot walks in full)."""
    queries: int
    """Queries answered."""
    gone: bool
    """Whether the root was moved or deleted (the watcher is of no more use)."""
    table_bytes: int
    """Bytes the watcher's own tables take, about."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WatchStatus:
        return cls(
            root=decode_path(d["root"]),
            watches=d.get("watches", 0),
            unwatched=list(d.get("unwatched", [])),
            changed=d.get("changed", 0),
            overflows=d.get("overflows", 0),
            queries=d.get("queries", 0),
            gone=bool(d.get("gone", False)),
            table_bytes=d.get("table_bytes", 0),
        )


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot: what :meth:`Workspace.snapshot`, ``list`` and ``show`` return.

    ``kept`` (what the walk left alone), ``prune_error`` and ``walk`` are filled only by
    :meth:`Workspace.snapshot`.
    """

    id: str
    label: str | None
    root: str
    """The id of the root tree."""
    created_ms: int
    """Milliseconds since the Unix epoch."""
    workspace_id: str
    protected: bool
    """Protected snapshots are never dropped by retention."""
    metadata: dict[str, Any]
    stats: Stats
    skipped: list[Skipped]
    excludes: list[str]
    max_file_bytes: int
    kept: list[KeptPath] = field(default_factory=list)
    prune_error: str | None = None
    """Why the workspace's retention failed after the snapshot, if it did."""
    walk: WalkInfo | None = None
    """What the snapshot walked (all of the tree, part of it or nothing, with a watcher: see
    :meth:`Workspace.watch`), and why; ``None`` from ``list`` and ``show``."""

    @property
    def created(self) -> _dt.datetime:
        """When it was taken, as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self.created_ms / 1000, tz=_dt.timezone.utc)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SnapshotInfo:
        return cls(
            id=d["id"],
            label=d.get("label"),
            root=d["root"],
            created_ms=d["created_ms"],
            workspace_id=d["workspace_id"],
            protected=bool(d.get("protected", False)),
            metadata=d.get("metadata") or {},
            stats=Stats.from_json(d.get("stats", {})),
            skipped=[Skipped.from_json(s) for s in d.get("skipped", [])],
            excludes=list(d.get("excludes", [])),
            max_file_bytes=d.get("max_file_bytes", 0),
            kept=[KeptPath.from_json(k) for k in d.get("kept", [])],
            prune_error=d.get("prune_error"),
            walk=WalkInfo.from_json(d["walk"]) if d.get("walk") is not None else None,
        )


@dataclass(frozen=True)
class EntryInfo:
    """One side of a change: ``kind`` is ``"file"``, ``"dir"`` or ``"symlink"``."""

    kind: str
    mode: int
    size: int
    id: str

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> EntryInfo | None:
        if d is None:
            return None
        return cls(d["kind"], d["mode"], d["size"], d["id"])


@dataclass(frozen=True)
class Change:
    """One changed path: ``kind`` is ``"added"``, ``"modified"``, ``"deleted"``,
    ``"mode-changed"`` or ``"type-changed"``; ``old``/``new`` are ``None`` on the side where
    the path does not exist."""

    path: str
    kind: str
    old: EntryInfo | None
    new: EntryInfo | None
    #: With ``diff(..., attribute=True)``: the checkpoint intervals it changed in, oldest first.
    attribution: list[Attribution] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Change:
        a = d.get("attribution")
        return cls(
            decode_path(d["path"]),
            d["kind"],
            EntryInfo.from_json(d.get("old")),
            EntryInfo.from_json(d.get("new")),
            None if a is None else [Attribution.from_json(x) for x in a],
        )


@dataclass(frozen=True)
class Attribution:
    """A checkpoint interval a path changed in, and what opened it: the tool call
    (``tool_use_id``, ``tool_name``) or subagent (``agent_id``) an agent's hook recorded in
    the checkpoint before it ran, where known."""

    #: The snapshot opening the interval: the files just before the change.
    from_: str
    #: The snapshot closing it; ``None`` for the files now.
    to: str | None
    label: str | None
    checkpoint_kind: str | None
    thread_id: str | None
    tool_use_id: str | None
    tool_name: str | None
    agent_id: str | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Attribution:
        return cls(
            d["from"],
            d.get("to"),
            d.get("label"),
            d.get("checkpoint_kind"),
            d.get("thread_id"),
            d.get("tool_use_id"),
            d.get("tool_name"),
            d.get("agent_id"),
        )


@dataclass(frozen=True)
class CaptureSettings:
    """How a snapshot was taken; a restore of it walks the workspace the same way."""

    excludes: list[str]
    max_file_bytes: int
    gitignore: bool
    refuse_hard_links: bool

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CaptureSettings:
        return cls(list(d.get("excludes", [])), d.get("max_file_bytes", 0), bool(d.get("gitignore")), bool(d.get("refuse_hard_links")))


@dataclass(frozen=True)
class Action:
    """One change a restore makes, in order.

    ``op`` is ``"remove_file"``, ``"remove_dir"``, ``"make_dir"``, ``"write_file"``,
    ``"make_symlink"`` or ``"set_mode"``; the other fields are set where the op has them.
    """

    op: str
    path: str
    mode: int | None = None
    blob: str | None = None
    size: int | None = None
    target: str | None = None
    """For ``make_symlink``: the blob holding the link's target bytes."""
    dir: bool | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Action:
        return cls(
            op=d["op"],
            path=decode_path(d["path"]),
            mode=d.get("mode"),
            blob=d.get("blob"),
            size=d.get("size"),
            target=d.get("target"),
            dir=d.get("dir"),
        )


@dataclass(frozen=True)
class RestorePlan:
    """Every change a restore would make, before any is made (the dry run).

    Pass it to :meth:`Workspace.apply` to carry it out exactly; the plan's original JSON
    document travels with it, unchanged.
    """

    snapshot_id: str
    target_root: str
    current_root: str
    capture: CaptureSettings
    actions: list[Action]
    restored: list[str]
    """Paths written or re-made."""
    deleted: list[str]
    """Paths removed (a directory with everything in it)."""
    unchanged: int
    kept: list[KeptPath]
    busy: bool
    """A hold stands: applying would be refused with :class:`BusyError`."""
    drifted: list[str]
    """Paths the restore changes that differ from the reference snapshot."""
    reference: str | None
    document: bytes = field(default=b"", repr=False, compare=False)
    """The plan as the library wrote it (what :meth:`Workspace.apply` sends back)."""
    paths: list[str] = field(default_factory=list)
    """The paths the restore is restricted to (empty: the whole workspace)."""
    on_drift: str = "overwrite"
    """What it was told to do with drifted paths (``"overwrite"``, ``"refuse"`` or ``"skip"``);
    :meth:`Workspace.apply` checks again with it unless given another."""

    @classmethod
    def from_json(cls, d: dict[str, Any], document: bytes) -> RestorePlan:
        return cls(
            snapshot_id=d["snapshot_id"],
            target_root=d["target_root"],
            current_root=d["current_root"],
            capture=CaptureSettings.from_json(d.get("capture", {})),
            actions=[Action.from_json(a) for a in d.get("actions", [])],
            restored=_paths(d.get("restored", [])),
            deleted=_paths(d.get("deleted", [])),
            unchanged=d.get("unchanged", 0),
            kept=[KeptPath.from_json(k) for k in d.get("kept", [])],
            busy=bool(d.get("busy", False)),
            drifted=_paths(d.get("drifted", [])),
            reference=d.get("reference"),
            document=document,
            paths=_paths(d.get("paths", [])),
            on_drift=d.get("on_drift", "overwrite"),
        )


@dataclass(frozen=True)
class RestoreReport:
    """What a restore did (or, with ``dry_run``, would do).

    Restoring ``safety_snapshot_id`` (with the same ``paths``, when it had some) undoes it.
    """

    snapshot_id: str
    dry_run: bool
    restored: list[str]
    deleted: list[str]
    unchanged: int
    kept: list[KeptPath]
    busy: bool
    drifted: list[str]
    safety_snapshot_id: str | None
    operations: int
    as_planned: bool
    journal: str | None
    paths: list[str] = field(default_factory=list)
    """The paths the restore was restricted to (empty: the whole workspace)."""
    safety_walk: WalkInfo | None = None
    """How the walk for the safety snapshot went (whether a watcher spared it the whole
    tree); ``None`` for a dry run, a restore that changed nothing, or a repeated key."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RestoreReport:
        return cls(
            snapshot_id=d["snapshot_id"],
            dry_run=bool(d.get("dry_run", False)),
            restored=_paths(d.get("restored", [])),
            deleted=_paths(d.get("deleted", [])),
            unchanged=d.get("unchanged", 0),
            kept=[KeptPath.from_json(k) for k in d.get("kept", [])],
            busy=bool(d.get("busy", False)),
            drifted=_paths(d.get("drifted", [])),
            safety_snapshot_id=d.get("safety_snapshot_id"),
            operations=d.get("operations", 0),
            as_planned=bool(d.get("as_planned", True)),
            journal=d.get("journal"),
            paths=_paths(d.get("paths", [])),
            safety_walk=(
                WalkInfo.from_json(d["safety_walk"]) if d.get("safety_walk") is not None else None
            ),
        )


@dataclass(frozen=True)
class Recovery:
    """A restore a crash interrupted, completed: restoring ``safety`` undoes it."""

    journal: str
    target: str
    safety: str | None
    completed: bool
    obstructed: list[str]
    """Paths an unrelated later edit obstructs, or that may not be changed; left as they are."""
    abandoned: bool = False
    """Ended as it stood by :meth:`Workspace.give_up`."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Recovery:
        return cls(
            d["journal"],
            d["target"],
            d.get("safety"),
            bool(d.get("completed")),
            _paths(d.get("obstructed", [])),
            bool(d.get("abandoned", False)),
        )


@dataclass(frozen=True)
class WorkspaceInfo:
    """A workspace's id, root and store, and the restores opening it completed."""

    id: str
    root: str
    store: str
    recovered: list[Recovery]
    store_home: str = "given"
    """Why the store is there: ``"data"`` (the default: the user's data directory, outside the
    workspace), ``"given"`` (``store=``), ``"env"`` (``$CAIRN_STORE``) or ``"legacy"`` (a
    ``<root>/.cairn`` an earlier version made)."""
    remote: str | None = None
    """The remote store the store caches (``s3://bucket/prefix``, never with credentials), or
    ``None``: the store is then the only copy."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkspaceInfo:
        return cls(
            d["id"],
            decode_path(d["root"]),
            decode_path(d["store"]),
            [Recovery.from_json(r) for r in d.get("recovered", [])],
            d.get("store_home", "given"),
            d.get("remote"),
        )


@dataclass(frozen=True)
class Retention:
    """A retention policy; every field left ``None`` keeps everything. Protected snapshots
    are always kept."""

    count: int | None = None
    """Keep at most this many (the newest) snapshots."""
    max_age: _dt.timedelta | float | None = None
    """Drop snapshots older than this (a timedelta, or seconds)."""
    max_total_bytes: int | None = None
    """Drop the oldest snapshots until the store holds at most this many bytes."""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.count is not None:
            d["count"] = self.count
        if self.max_age is not None:
            d["max_age_ms"] = millis(self.max_age)
        if self.max_total_bytes is not None:
            d["max_total_bytes"] = self.max_total_bytes
        return d


def millis(value: _dt.timedelta | float) -> int:
    """A duration (timedelta, or seconds) in whole milliseconds."""
    seconds = value.total_seconds() if isinstance(value, _dt.timedelta) else float(value)
    if seconds < 0:
        raise ValueError(f"a duration must not be negative, got {value!r}")
    return round(seconds * 1000)


@dataclass(frozen=True)
class Unreadable:
    """A snapshot whose objects could not all be read while marking; what it reaches is kept."""

    snapshot: str
    error: str


@dataclass(frozen=True)
class PackPlan:
    """One pack in a collection plan."""

    pack: str
    objects: int
    live_objects: int
    bytes: int


@dataclass(frozen=True)
class GcPlan:
    """What a collection sweeps (or, for a dry run, would sweep)."""

    snapshots: int
    reachable_objects: int
    unreadable: list[Unreadable]
    delete_packs: list[PackPlan]
    repack: list[PackPlan]
    delete_large: list[str]
    orphan_packs: list[str]
    temp_files: list[str]
    young_unreachable: int
    """Unreachable objects kept because they are younger than the grace period."""
    foreign: list[str]
    """Entries of the store's object directories that are not its own: reported, never touched."""
    symlinks: list[str] = field(default_factory=list)
    """Symlinks in the store's object directories (never the store's own): removed."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GcPlan:
        return cls(
            snapshots=d.get("snapshots", 0),
            reachable_objects=d.get("reachable_objects", 0),
            unreadable=[Unreadable(u["snapshot"], u["error"]) for u in d.get("unreadable", [])],
            delete_packs=[PackPlan(**p) for p in d.get("delete_packs", [])],
            repack=[PackPlan(**p) for p in d.get("repack", [])],
            delete_large=list(d.get("delete_large", [])),
            orphan_packs=_paths(d.get("orphan_packs", [])),
            temp_files=_paths(d.get("temp_files", [])),
            young_unreachable=d.get("young_unreachable", 0),
            foreign=_paths(d.get("foreign", [])),
            symlinks=_paths(d.get("symlinks", [])),
        )


@dataclass(frozen=True)
class GcReport:
    """What a collection did. For a dry run, ``dry_run`` is true, ``plan`` is what it would
    do and the counts are zero."""

    deferred: bool
    """The sweep was deferred because another operation was running."""
    plan: GcPlan
    packs_deleted: int
    packs_repacked: int
    objects_deleted: int
    bytes_freed: int
    kept_for_damage: list[str]
    dry_run: bool = False
    remote: RemoteGcReport | None = None
    """For a workspace whose store caches a remote: what the remote's collector did (the
    other fields but ``bytes_freed`` and ``dry_run`` are then empty)."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GcReport:
        return cls(
            deferred=bool(d.get("deferred", False)),
            plan=GcPlan.from_json(d.get("plan", {})),
            packs_deleted=d.get("packs_deleted", 0),
            packs_repacked=d.get("packs_repacked", 0),
            objects_deleted=d.get("objects_deleted", 0),
            bytes_freed=d.get("bytes_freed", 0),
            kept_for_damage=list(d.get("kept_for_damage", [])),
            remote=RemoteGcReport.from_json(d["remote"]) if d.get("remote") is not None else None,
        )

    @classmethod
    def from_plan_json(cls, d: dict[str, Any]) -> GcReport:
        return cls(False, GcPlan.from_json(d), 0, 0, 0, 0, [], dry_run=True)


@dataclass(frozen=True)
class PruneReport:
    """What a prune or a delete did: the snapshots deleted, and the collection after."""

    deleted: list[str]
    kept: int
    gc: GcReport

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PruneReport:
        return cls(list(d.get("deleted", [])), d.get("kept", 0), GcReport.from_json(d.get("gc", {})))


@dataclass(frozen=True)
class BadCopy:
    """A copy of an object that failed its check (it is put in quarantine)."""

    id: str
    path: str
    error: str


@dataclass(frozen=True)
class BrokenIndex:
    """A pack index that could not be loaded."""

    path: str
    error: str


@dataclass(frozen=True)
class SnapshotCheck:
    """The check of one snapshot."""

    id: str
    missing: list[str]
    corrupt: list[str]
    unreadable: str | None

    @property
    def ok(self) -> bool:
        """Whether the snapshot can be restored in full."""
        return not self.missing and not self.corrupt and self.unreadable is None


@dataclass(frozen=True)
class VerifyReport:
    """What verifying the store found; ``ok`` says whether all is well."""

    ok: bool
    copies_checked: int
    bytes_checked: int
    bad_copies: list[BadCopy]
    corrupt: list[str]
    broken_indexes: list[BrokenIndex]
    snapshots: list[SnapshotCheck]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> VerifyReport:
        return cls(
            ok=bool(d.get("ok", False)),
            copies_checked=d.get("copies_checked", 0),
            bytes_checked=d.get("bytes_checked", 0),
            bad_copies=[BadCopy(b["id"], decode_path(b["path"]), b["error"]) for b in d.get("bad_copies", [])],
            corrupt=list(d.get("corrupt", [])),
            broken_indexes=[BrokenIndex(decode_path(b["path"]), b["error"]) for b in d.get("broken_indexes", [])],
            snapshots=[
                SnapshotCheck(s["id"], list(s.get("missing", [])), list(s.get("corrupt", [])), s.get("unreadable"))
                for s in d.get("snapshots", [])
            ],
        )


@dataclass(frozen=True)
class CopyReport:
    """What copying a snapshot to another store did (the id is the same in both)."""

    snapshot: str
    objects_copied: int
    bytes_copied: int
    already_present: bool

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CopyReport:
        return cls(d["snapshot"], d.get("objects_copied", 0), d.get("bytes_copied", 0), bool(d.get("already_present")))


@dataclass(frozen=True)
class RemoteOptions:
    """How a remote store (``remote=`` of :class:`~cairn.Workspace`) is reached. Every field
    left ``None`` takes its default: for S3, the ``AWS_*`` variables (``AWS_ENDPOINT``,
    ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``), else AWS itself. The
    secret never appears in a repr or an error message."""

    endpoint: str | None = None
    """The S3 endpoint (``http://127.0.0.1:3900`` for a local Garage or MinIO)."""
    region: str | None = None
    """The S3 region (default ``us-east-1``)."""
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    allow_http: bool | None = None
    """Allow plain HTTP (default: when the endpoint starts with ``http://``)."""
    connect_timeout: _dt.timedelta | float | None = None
    """How long to wait for a connection (default 3 s): an unreachable endpoint fails fast."""
    request_timeout: _dt.timedelta | float | None = None
    """How long one request may take (default 300 s)."""
    max_retries: int | None = None
    """Retries of a failed request (default 3)."""
    retry_timeout: _dt.timedelta | float | None = None
    """No retry starts later than this after the first try (default 5 s)."""
    lease_ttl: _dt.timedelta | float | None = None
    """The lease time of the store's operations on the remote (default 60 s)."""
    extra: dict[str, str] = field(default_factory=dict)
    """Further ``object_store`` configuration keys (for ``gs://`` and ``az://`` too)."""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "endpoint": self.endpoint,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "allow_http": self.allow_http,
            "max_retries": self.max_retries,
        }
        for name, value in (
            ("connect_timeout_ms", self.connect_timeout),
            ("request_timeout_ms", self.request_timeout),
            ("retry_timeout_ms", self.retry_timeout),
            ("lease_ttl_ms", self.lease_ttl),
        ):
            d[name] = None if value is None else millis(value)
        if self.extra:
            d["extra"] = dict(self.extra)
        return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class RemoteGcReport:
    """What a collection of a remote store did: unreachable objects are marked as candidates
    in one run and deleted in a later one, once the grace period has passed."""

    snapshots: int
    """Manifests marked."""
    reachable_objects: int
    candidates: int
    """Unreachable packs and large objects listed as candidates after the run."""
    kept_for_grace: int
    kept_for_leases: int
    packs_deleted: int
    large_deleted: int
    bytes_freed: int
    live_leases: int = 0
    unreadable: list[Any] = field(default_factory=list)
    snapshots_during_run: int = 0
    """Manifests that appeared while the collection ran (marked too)."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RemoteGcReport:
        return cls(
            snapshots=d.get("snapshots", 0),
            reachable_objects=d.get("reachable_objects", 0),
            candidates=d.get("candidates", 0),
            kept_for_grace=d.get("kept_for_grace", 0),
            kept_for_leases=d.get("kept_for_leases", 0),
            packs_deleted=d.get("packs_deleted", 0),
            large_deleted=d.get("large_deleted", 0),
            bytes_freed=d.get("bytes_freed", 0),
            live_leases=d.get("live_leases", 0),
            unreadable=list(d.get("unreadable", [])),
            snapshots_during_run=d.get("snapshots_during_run", 0),
        )


@dataclass(frozen=True)
class CacheTrim:
    """What :meth:`~cairn.Workspace.trim_cache` did."""

    removed_files: int
    """Packs and large objects removed from the cache (the remote keeps them)."""
    removed_bytes: int
    cached_bytes: int
    """Bytes of remote-held packs and large objects still cached."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CacheTrim:
        return cls(d.get("removed_files", 0), d.get("removed_bytes", 0), d.get("cached_bytes", 0))
