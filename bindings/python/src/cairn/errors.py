"""One exception hierarchy, built from the C status table.

Every failed call raises a :class:`CairnError` subclass chosen by its status: the class's
``kind`` is the status's stable name (``"NOT_FOUND"``), ``code`` its number. Where the
meaning matches a builtin exception, the class inherits it too, so ``except
FileNotFoundError`` catches :class:`NotFoundError` and ``except PermissionError`` catches
:class:`DeniedError`.
"""

from __future__ import annotations

import errno as _errno
import os
from typing import Any

from ._ffi import STATUSES, bytes_of, ffi, lib, status_name, status_str

__all__ = [
    "CairnError",
    "InvalidArgumentError",
    "NotFoundError",
    "ValidationError",
    "BusyError",
    "WorkspaceBusyError",
    "ThreadBusyError",
    "DeniedError",
    "CairnIOError",
    "CorruptError",
    "ConflictError",
    "CancelledError",
    "RunInterruptedError",
    "UnsupportedError",
    "NullArgumentError",
    "PanicError",
    "AbortedByCallbackError",
    "ClosedError",
    "error_class",
]


class CairnError(Exception):
    """An error from Cairn.

    Attributes:
        kind: the status's stable name, e.g. ``"NOT_FOUND"`` (``"CLOSED"`` for
            :class:`ClosedError`, which no C call returns).
        code: the ``cairn_status`` number, e.g. 2 (``None`` for :class:`ClosedError`).
        message: what happened and what to do, from the library.
        path: the path or id the error concerns (a ``str`` decoded as ``os.fsdecode``
            does), or ``None``.
    """

    kind: str = "UNKNOWN"
    code: int | None = None

    def __init__(self, message: str, *, code: int | None = None, path: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        if code is not None:
            self.code = code
        if isinstance(self, OSError):
            _fill_os_error(self, self.kind, message, path)

    def __str__(self) -> str:
        if self.path and self.path not in self.message:
            return f"{self.message} ({self.path})"
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.code, self.path))


def _rebuild(cls: type[CairnError], message: str, code: int | None, path: str | None) -> CairnError:
    return cls(message, code=code, path=path)


def _fill_os_error(e: OSError, kind: str, message: str, path: str | None) -> None:
    """Fills the attributes `except OSError` handlers look at."""
    e.strerror = message
    e.filename = path
    e.errno = _ERRNO.get(kind)


class InvalidArgumentError(CairnError, ValueError):
    """An argument was malformed: a bad id, an ambiguous prefix, bad options."""


class NotFoundError(CairnError, FileNotFoundError):
    """The named snapshot, object, thread, entry or path does not exist."""


class ValidationError(CairnError):
    """A well-formed request that the current state does not allow."""


class BusyError(CairnError):
    """A hold or another operation is in the way; wait for it, then try again."""


class WorkspaceBusyError(BusyError):
    """A run or hold in the same or an overlapping workspace refuses a file restore."""


class ThreadBusyError(BusyError):
    """A run of the thread is going on."""


class DeniedError(CairnError, PermissionError):
    """Refused: it would lose data or cross a permission boundary. Nothing was changed."""


class CairnIOError(CairnError, OSError):
    """The operating system failed a read or a write."""


class CorruptError(CairnError):
    """Stored data does not decode or does not match its id."""


class ConflictError(CairnError):
    """Someone else's change is in the way (e.g. files edited since the reference)."""


class CancelledError(CairnError):
    """Cancelled through a :class:`cairn.CancelToken`."""


class RunInterruptedError(CairnError):
    """A run was interrupted by a forced rewind."""


class UnsupportedError(CairnError):
    """Not supported here (e.g. a store format newer than this library)."""


class NullArgumentError(CairnError):
    """A required pointer was NULL (a bug in the binding if seen through :mod:`cairn`)."""


class PanicError(CairnError):
    """A panic was caught at the C boundary: a bug in Cairn, please report it."""


class AbortedByCallbackError(CairnError):
    """A progress callback asked to stop (returned ``False``); nothing was recorded."""


class ClosedError(CairnError, ValueError):
    """A handle was used after ``close()``."""

    kind = "CLOSED"


# The one table: status name -> class. The codes come from the header's enum (via the cdef);
# a test checks that every CAIRN_ERR_* status has an entry and that names agree with
# cairn_status_name().
_CLASSES: dict[str, type[CairnError]] = {
    "INVALID_ARGUMENT": InvalidArgumentError,
    "NOT_FOUND": NotFoundError,
    "VALIDATION": ValidationError,
    "BUSY": BusyError,
    "WORKSPACE_BUSY": WorkspaceBusyError,
    "THREAD_BUSY": ThreadBusyError,
    "DENIED": DeniedError,
    "IO": CairnIOError,
    "CORRUPT": CorruptError,
    "CONFLICT": ConflictError,
    "CANCELLED": CancelledError,
    "RUN_INTERRUPTED": RunInterruptedError,
    "UNSUPPORTED": UnsupportedError,
    "NULL_ARGUMENT": NullArgumentError,
    "PANIC": PanicError,
    "ABORTED_BY_CALLBACK": AbortedByCallbackError,
}

_ERRNO = {"NOT_FOUND": _errno.ENOENT, "DENIED": _errno.EACCES, "IO": _errno.EIO}

_BY_CODE: dict[int, type[CairnError]] = {}
for _name, _cls in _CLASSES.items():
    _code = STATUSES.get(f"CAIRN_ERR_{_name}")
    if _code is None:  # the header dropped a status the table still names
        continue
    _cls.kind = _name
    _cls.code = _code
    _BY_CODE[_code] = _cls


def error_class(code: int) -> type[CairnError]:
    """The exception class for a ``cairn_status`` (``CairnError`` for an unknown one)."""
    return _BY_CODE.get(code, CairnError)


def from_status(code: int, err: Any = None) -> CairnError:
    """Builds the exception for a failed call from its status and ``cairn_error``, freeing it."""
    message, path = "", None
    if err is not None and err != ffi.NULL:
        try:
            message = bytes_of(lib.cairn_error_message(err)).decode("utf-8", "replace")
            raw_path = bytes_of(lib.cairn_error_path(err))
            path = os.fsdecode(raw_path) if raw_path else None
        finally:
            lib.cairn_error_free(err)
    cls = error_class(code)
    if not message:
        message = status_str(code)
    exc = cls(message, code=code, path=path)
    if cls is CairnError:
        exc.kind = status_name(code)
    return exc
