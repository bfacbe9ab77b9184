"""The package as installed (library bundled, typed) and the example; the sdist's contents."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import files
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _backend():
    """The build backend (build_backend/cairn_build.py), imported from the checkout."""
    if not (PACKAGE_DIR.parent.parent / "crates" / "ffi").is_dir():
        pytest.skip("not in a checkout of the repository")
    sys.path.insert(0, str(PACKAGE_DIR / "build_backend"))
    try:
        import cairn_build
    finally:
        sys.path.remove(str(PACKAGE_DIR / "build_backend"))
    return cairn_build


def test_the_installed_wheel_holds_the_library_and_py_typed():
    names = {f.as_posix() for f in files("cairn") or []}
    assert "cairn/libcairn.so" in names
    assert "cairn/py.typed" in names
    assert "cairn/_cdef.h" in names


def test_the_example_agent_loop_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, str(PACKAGE_DIR / "examples" / "agent_loop.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "rewound to before 'add tests and drop the README'" in out.stdout
    assert "ok: the undo rewound the files and the conversation" in out.stdout


def test_the_sdist_carries_the_python_sources_and_only_the_crates_libcairn_needs(tmp_path):
    cairn_build = _backend()
    name = cairn_build.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as tar:
        members = tar.getnames()
        base = members[0].split("/")[0]
        names = {m.split("/", 1)[1] for m in members if "/" in m}
        cargo_toml = tar.extractfile(f"{base}/_rust/Cargo.toml").read().decode()
    assert {"pyproject.toml", "PKG-INFO", "src/cairn/_cdef.h", "build_backend/cairn_build.py"} <= names
    assert "_rust/crates/ffi/src/lib.rs" in names and "_rust/Cargo.lock" in names
    assert not any(n.endswith("libcairn.so") or "/target/" in n or "__pycache__" in n for n in names)
    assert '"crates/ffi"' in cargo_toml and '"crates/cli"' not in cargo_toml


def test_a_wheel_built_for_a_manylinux_tag_carries_it_the_library_and_the_licences(tmp_path, monkeypatch):
    import cairn._ffi

    cairn_build = _backend()
    monkeypatch.setenv("CAIRN_LIBRARY", cairn._ffi.LOADED_PATH)
    monkeypatch.setenv("CAIRN_WHEEL_PLATFORM", "manylinux_2_34_x86_64")
    name = cairn_build.build_wheel(str(tmp_path))
    assert name.endswith("-py3-none-manylinux_2_34_x86_64.whl")
    with zipfile.ZipFile(tmp_path / name) as whl:
        names = set(whl.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL"))
        assert "Tag: py3-none-manylinux_2_34_x86_64" in whl.read(f"{dist_info}/WHEEL").decode()
    assert "cairn/libcairn.so" in names
    assert {f"{dist_info}/licenses/LICENSE-MIT", f"{dist_info}/licenses/LICENSE-APACHE"} <= names

    monkeypatch.setenv("CAIRN_WHEEL_PLATFORM", "manylinux 2.34")
    with pytest.raises(RuntimeError, match="is not a platform tag"):
        cairn_build.build_wheel(str(tmp_path))
