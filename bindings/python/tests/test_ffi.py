"""The thin layer: declared from include/cairn.h, loading the bundled library, checking its ABI."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cairn
from cairn import _ffi

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def header_functions(header: str) -> list[str]:
    body = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
    return re.findall(r"\b(cairn_\w+)\s*\(", body)


def test_every_header_function_is_declared_in_the_thin_layer(header):
    functions = header_functions(header)
    assert len(functions) >= 20, "the header parse found too few functions"
    declared = set(dir(_ffi.lib))
    missing = [f for f in functions if f not in declared]
    assert not missing, f"declare these in the thin layer (run tools/gen_cdef.py): {missing}"


def test_every_declared_function_resolves_in_the_bundled_library(header):
    for name in header_functions(header):
        assert getattr(_ffi.lib, name) is not None  # raises AttributeError if not exported


def test_the_cdef_is_up_to_date_with_the_header(header):
    sys.path.insert(0, str(TOOLS))
    try:
        import gen_cdef
    finally:
        sys.path.remove(str(TOOLS))
    assert gen_cdef.derive(header) == _ffi.CDEF, "run python3 bindings/python/tools/gen_cdef.py"


def test_the_abi_version_matches_the_header_and_the_library(header):
    m = re.search(r"#define CAIRN_ABI_VERSION (\d+)", header)
    assert m is not None
    assert cairn.ABI_VERSION == int(m.group(1)) == _ffi.lib.cairn_abi_version()


def test_the_package_version_is_the_library_version(header):
    m = re.search(r'#define CAIRN_VERSION_STRING "([^"]+)"', header)
    assert m is not None
    assert cairn.__version__ == cairn.library_version() == m.group(1)
    from importlib.metadata import version

    assert version("cairn") == cairn.__version__


def test_the_library_is_the_one_bundled_in_the_package():
    bundled = Path(cairn.__file__).parent / "libcairn.so"
    assert bundled.is_file()
    assert Path(_ffi.LOADED_PATH) == bundled
    assert (Path(cairn.__file__).parent / "py.typed").is_file()


def test_an_abi_mismatch_fails_the_import_with_a_clear_message():
    # A library reporting another ABI version: patch cffi's dlopen before importing cairn.
    code = textwrap.dedent(
        """
        import cffi
        real = cffi.FFI.dlopen
        class Lib:
            def __init__(self, lib): self._lib = lib
            def __getattr__(self, name): return getattr(self._lib, name)
            def cairn_abi_version(self): return 999
        cffi.FFI.dlopen = lambda self, *a, **k: Lib(real(self, *a, **k))
        try:
            import cairn
        except ImportError as e:
            print("ImportError:", e)
        else:
            print("imported")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ImportError:"), out
    assert "ABI version 999" in out and f"ABI version {cairn.ABI_VERSION}" in out


def test_statuses_are_read_from_the_header_enum(header):
    names = re.findall(r"\b(CAIRN_(?:OK|ERR_\w+)) = (\d+)", header)
    assert names
    assert {n: int(v) for n, v in names} == _ffi.STATUSES


def test_a_panic_in_the_library_becomes_panic_error():
    err = _ffi.ffi.new("cairn_error **")
    status = _ffi.lib.cairn_debug_panic(err)
    with pytest.raises(cairn.PanicError) as info:
        from cairn._handle import check

        check(status, err)
    assert info.value.kind == "PANIC"
    assert "bug in Cairn" in info.value.message


def test_a_null_handle_becomes_null_argument_error():
    from cairn._handle import call_json

    with pytest.raises(cairn.NullArgumentError) as info:
        call_json(_ffi.lib.cairn_workspace_list, _ffi.ffi.NULL)
    assert info.value.kind == "NULL_ARGUMENT"
    assert "must not be NULL" in info.value.message
