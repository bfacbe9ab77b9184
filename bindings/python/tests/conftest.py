"""Fixtures for the cairn tests. They run against the *installed* package (test.sh installs
it into a venv under target/), never against src/ directly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import cairn

PACKAGE_DIR = Path(__file__).resolve().parent.parent
# include/cairn.h of the repository (or of an sdist's _rust/ copy).
HEADER_CANDIDATES = [PACKAGE_DIR.parent.parent / "include" / "cairn.h", PACKAGE_DIR / "_rust" / "include" / "cairn.h"]


def pytest_report_header(config):
    return f"cairn {cairn.__version__} (ABI {cairn.ABI_VERSION}) from {Path(cairn.__file__).parent}"


def pytest_sessionstart(session):
    src = PACKAGE_DIR / "src"
    if Path(cairn.__file__).resolve().is_relative_to(src) and not (src / "cairn" / "libcairn.so").exists():
        raise pytest.UsageError("tests must run against an installed cairn: use bindings/python/test.sh")


@pytest.fixture
def header() -> str:
    for p in HEADER_CANDIDATES:
        if p.is_file():
            return p.read_text()
    pytest.skip("include/cairn.h is not beside this package")


def write(root: Path, rel: str | bytes, content: str | bytes = "") -> Path:
    """Writes a file under root, making its parents; `rel` may be bytes (any name)."""
    path = Path(os.fsdecode(os.path.join(os.fsencode(root), os.fsencode(rel))))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.fixture(autouse=True)
def cairn_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Cairn's data directory for the test: a workspace opened with no store keeps it here,
    never in the home of whoever runs the tests."""
    home = tmp_path / "cairn-home"
    monkeypatch.setenv("CAIRN_HOME", str(home))
    monkeypatch.delenv("CAIRN_STORE", raising=False)
    return home


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A small workspace tree."""
    r = tmp_path / "root"
    write(r, "src/main.py", "print('hello')\n")
    write(r, "README.md", "# project\n")
    return r


@pytest.fixture
def ws(root: Path, tmp_path: Path) -> Iterator[cairn.Workspace]:
    """A workspace over `root` with its store outside the tree."""
    with cairn.Workspace(root, store=tmp_path / "store") as w:
        yield w


BIG_FILES = 3000


@pytest.fixture(scope="session")
def big_tree(tmp_path_factory) -> Path:
    """A read-only tree of a few thousand files (~12 MB), made once: creating files is the
    slow part here. Tests snapshot it into stores of their own and never change it."""
    r = tmp_path_factory.mktemp("big") / "root"
    make_tree(r, BIG_FILES, size=4096)
    return r


def make_tree(root: Path, files: int, size: int = 256, dirs: int = 40) -> None:
    """`files` files of `size` bytes spread over `dirs` directories."""
    blob = os.urandom(size)
    for i in range(files):
        d = root / "gen" / f"d{i % dirs:03d}"
        if i < dirs:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.bin").write_bytes(blob[: size - 8] + i.to_bytes(8, "little"))
