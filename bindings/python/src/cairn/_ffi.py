"""The thin layer: cffi (ABI mode) declarations of ``include/cairn.h`` and the loaded library.

``ffi`` is declared from ``_cdef.h``, which ``tools/gen_cdef.py`` derives from the header
(a test checks that every ``cairn_*`` function of the header is declared here and that
``_cdef.h`` is up to date). ``lib`` is ``libcairn.so`` from this package's directory, the
copy the wheel bundles. Nothing here is idiomatic: see :mod:`cairn` for the Python API.

ABI-mode calls release the GIL for their duration, so other Python threads run while a
snapshot or a restore works.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cffi import FFI

#: The ABI version (``CAIRN_ABI_VERSION``) this package was written for. The library's
#: ``cairn_abi_version()`` must equal it, or importing :mod:`cairn` fails.
ABI_VERSION = 1

_HERE = Path(__file__).resolve().parent
CDEF = (_HERE / "_cdef.h").read_text(encoding="utf-8")
LIBRARY_PATH = _HERE / "libcairn.so"

ffi = FFI()
ffi.cdef(CDEF)


def _load() -> tuple[Any, str]:
    # CAIRN_LIBRARY is a development override (a freshly built library); users never need it.
    path = os.environ.get("CAIRN_LIBRARY") or str(LIBRARY_PATH)
    try:
        lib = ffi.dlopen(path)
    except OSError as e:
        raise ImportError(
            f"cairn: cannot load libcairn from {path}: {e}. Reinstall the package: "
            "`pip install --force-reinstall cairn` takes the wheel that bundles the library "
            "(manylinux x86_64); elsewhere `pip install ./bindings/python` in a checkout builds "
            "it with cargo."
        ) from e
    found = lib.cairn_abi_version()
    if found != ABI_VERSION:
        version = c_string(lib.cairn_version())
        raise ImportError(
            f"cairn: libcairn at {path} (version {version}) has ABI version {found}, but this "
            f"Python package was written for ABI version {ABI_VERSION}; reinstall the package "
            "from the same checkout as the library (`pip install ./bindings/python`)."
        )
    return lib, path


def status_name(code: int) -> str:
    """The stable name of a status (``"NOT_FOUND"``), from the library."""
    return c_string(lib.cairn_status_name(code))


def status_str(code: int) -> str:
    """The library's short description of a status (``"not found"``)."""
    return c_string(lib.cairn_status_str(code))


def c_string(p: Any) -> str:
    """A static NUL-terminated string of the library as ``str``."""
    raw: bytes = ffi.string(p)
    return raw.decode()


def bytes_of(view: Any) -> bytes:
    """Copies a borrowed ``cairn_bytes`` view into Python bytes."""
    if view.len == 0:
        return b""
    data: bytes = ffi.buffer(view.data, view.len)[:]
    return data


lib, LOADED_PATH = _load()

#: Every status the header names, ``{"CAIRN_ERR_NOT_FOUND": 2, ...}``, read from the cdef.
STATUSES: dict[str, int] = {
    name: getattr(lib, name) for name in dir(lib) if name == "CAIRN_OK" or name.startswith("CAIRN_ERR_")
}
