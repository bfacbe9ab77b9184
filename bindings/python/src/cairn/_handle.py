"""The handle base class and the helpers every call goes through."""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ._ffi import bytes_of, ffi, lib
from .errors import ClosedError, from_status

__all__ = ["Managed"]

M = TypeVar("M", bound="Managed")


class Managed:
    """Base class of every object that owns a C handle.

    ``close()`` releases the handle; it is idempotent and safe from any thread. A call in
    progress on another thread (or a progress callback closing its own workspace) keeps the
    handle alive until that call returns: the handle is freed when the last call using it
    finishes, never under it. Using the object after ``close()`` raises
    :class:`~cairn.ClosedError`. ``with obj:`` closes on exit, and a ``weakref.finalize``
    backstop frees the handle if the object is garbage-collected unclosed.
    """

    _free: Callable[[Any], None]  # the C _free function, set by each subclass

    def __init__(self, ptr: Any) -> None:
        self._ptr = ptr
        self._lock = threading.Lock()
        self._active = 0
        self._closed = False
        # The finalizer holds the C pointer, never `self`.
        self._finalizer = weakref.finalize(self, type(self)._free, ptr)

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def close(self) -> None:
        """Releases the handle. Calling it again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            busy = self._active > 0
        if not busy:
            self._finalizer()

    @contextmanager
    def _use(self) -> Iterator[Any]:
        """Borrows the C pointer for one call; raises ClosedError after close()."""
        with self._lock:
            if self._closed:
                raise ClosedError(f"this {type(self).__name__} is closed; open a new one")
            self._active += 1
        try:
            yield self._ptr
        finally:
            with self._lock:
                self._active -= 1
                free_now = self._closed and self._active == 0
            if free_now:
                self._finalizer()

    def __enter__(self: M) -> M:
        if self._closed:
            raise ClosedError(f"this {type(self).__name__} is closed; open a new one")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} {state}>"


def check(status: int, err_box: Any) -> None:
    """Raises the exception for a non-OK status, freeing the error object."""
    if status != lib.CAIRN_OK:
        raise from_status(status, err_box[0] if err_box is not None else None)


def take_buf(buf: Any) -> bytes:
    """Copies an owned cairn_buf's bytes and frees it."""
    try:
        return bytes_of(lib.cairn_buf_bytes(buf))
    finally:
        lib.cairn_buf_free(buf)


def call_json(fn: Callable[..., int], *args: Any) -> Any:
    """Calls a function ending in ``(cairn_buf **out, cairn_error **err_out)``: raises on
    error, returns the parsed JSON document."""
    return json.loads(call_bytes(fn, *args))


def call_bytes(fn: Callable[..., int], *args: Any) -> bytes:
    """As :func:`call_json`, returning the document's bytes unparsed."""
    out = ffi.new("cairn_buf **")
    err = ffi.new("cairn_error **")
    status = fn(*args, out, err)
    check(status, err)
    return take_buf(out[0])


def text_arg(value: str, what: str) -> bytes:
    """A name (label, id, prefix) as the UTF-8 bytes the library expects.

    A ``str`` holding surrogates (an undecodable name) is passed as its raw bytes, which the
    library refuses with InvalidArgumentError, the same answer as for any non-UTF-8 name.
    """
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    return value.encode("utf-8", "surrogateescape")


def json_arg(doc: dict[str, Any] | None) -> bytes:
    """An options document; empty (the defaults) when there is nothing to say."""
    if not doc:
        return b""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
