"""The in-tree PEP 517 build backend of the `cairn` Python package.

`pip install ./bindings/python` calls `build_wheel` here. It builds libcairn with
``cargo build --release -p cairn-ffi`` in the Cargo workspace the package sits in (or in the
``_rust/`` copy an sdist carries), strips its debug information, and writes a wheel holding
``src/cairn`` plus ``cairn/libcairn.so``. The wheel is tagged ``py3-none-<platform>``: the
Python code loads the library through cffi's ABI mode, so one wheel serves every CPython 3
version but only this platform.

No third-party build dependency is needed (``tomllib`` reads pyproject.toml; ``tomli`` on
Python 3.10), so the build works without network access once cargo has its crates.

Environment:

``CAIRN_LIBRARY``
    the path of an already built ``libcairn.so`` to bundle instead of running cargo.
``CARGO``
    the cargo binary (default: ``cargo`` on PATH).
``CAIRN_NO_STRIP``
    set to keep debug information in the bundled library.
``CAIRN_WHEEL_PLATFORM``
    the platform tag to give the wheel instead of this machine's (``linux_x86_64``).
    ``scripts/package`` sets the ``manylinux_2_XX_x86_64`` tag that ``auditwheel show`` finds
    the library consistent with; pip and PyPI accept only such tags from other machines.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PACKAGE_DIR = Path(__file__).resolve().parent.parent
LIB_NAME = "libcairn.so"
RUST_COPY = "_rust"  # where an sdist keeps the Cargo workspace

__all__ = [
    "build_wheel",
    "build_sdist",
    "build_editable",
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_wheel",
    "prepare_metadata_for_build_editable",
]


# ---------------------------------------------------------------------------------------------
# Project metadata


def _pyproject() -> dict:
    with open(PACKAGE_DIR / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _workspace_root() -> Path:
    """The Cargo workspace holding crates/ffi: the sdist's copy, or an ancestor directory."""
    copy = PACKAGE_DIR / RUST_COPY
    if (copy / "Cargo.toml").is_file():
        return copy
    for d in PACKAGE_DIR.parents:
        if (d / "Cargo.toml").is_file() and (d / "crates" / "ffi" / "Cargo.toml").is_file():
            return d
    raise RuntimeError(
        f"cannot find the Cairn Cargo workspace above {PACKAGE_DIR}: build the package from a "
        "checkout of the repository, or set CAIRN_LIBRARY to a built libcairn.so"
    )


def _version() -> str:
    """The version of the Rust workspace (`[workspace.package] version`): one source of truth."""
    project = _pyproject()["project"]
    if "version" in project:
        return project["version"]
    with open(_workspace_root() / "Cargo.toml", "rb") as f:
        cargo = tomllib.load(f)
    return cargo["workspace"]["package"]["version"]


def _metadata() -> str:
    project = _pyproject()["project"]
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {_version()}",
        f"Summary: {project.get('description', '')}",
    ]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    license_ = project.get("license", {})
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    for dep in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for dep in deps:
            marker = f"extra == '{extra}'"
            if ";" in dep:
                req, _, cond = dep.partition(";")
                lines.append(f"Requires-Dist: {req.strip()} ; ({cond.strip()}) and {marker}")
            else:
                lines.append(f"Requires-Dist: {dep} ; {marker}")
    for c in project.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    readme = PACKAGE_DIR / project.get("readme", "README.md")
    body = ""
    if readme.is_file():
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + readme.read_text(encoding="utf-8")
    return "\n".join(lines) + "\n" + body


def _dist_name() -> str:
    return re.sub(r"[-_.]+", "_", _pyproject()["project"]["name"]).lower()


def _platform_tag() -> str:
    given = os.environ.get("CAIRN_WHEEL_PLATFORM")
    if given:
        if not re.fullmatch(r"[a-z0-9_]+", given):
            raise RuntimeError(
                f"CAIRN_WHEEL_PLATFORM={given!r} is not a platform tag (for example "
                "manylinux_2_34_x86_64)"
            )
        return given
    return re.sub(r"[-.]", "_", sysconfig.get_platform())


def _licence_files() -> list[tuple[str, bytes]]:
    """(name in the wheel, content) of the licence files at the workspace root (LICENSE-*)."""
    try:
        root = _workspace_root()
    except RuntimeError:
        return []
    name, version = _dist_name(), _version()
    return [
        (f"{name}-{version}.dist-info/licenses/{p.name}", p.read_bytes())
        for p in sorted(root.glob("LICENSE*"))
        if p.is_file()
    ]


# ---------------------------------------------------------------------------------------------
# The native library


def _cargo() -> str:
    return os.environ.get("CARGO", "cargo")


def _build_library() -> Path:
    """Builds libcairn.so with cargo (or takes CAIRN_LIBRARY) and returns its path."""
    given = os.environ.get("CAIRN_LIBRARY")
    if given:
        path = Path(given)
        if not path.is_file():
            raise RuntimeError(f"CAIRN_LIBRARY={given} is not a file")
        return path
    root = _workspace_root()
    cargo = _cargo()
    if shutil.which(cargo) is None:
        raise RuntimeError(
            f"'{cargo}' was not found: building the cairn package needs a Rust toolchain "
            "(https://rustup.rs), or CAIRN_LIBRARY set to a built libcairn.so"
        )
    cmd = [cargo, "build", "--release", "-p", "cairn-ffi"]
    print(f"cairn build: {' '.join(cmd)} (in {root})", file=sys.stderr, flush=True)
    # Cargo's progress goes to our stderr; pip shows it with -v.
    subprocess.run(cmd, cwd=root, check=True, stdout=sys.stderr)
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    target = Path(json.loads(meta.stdout)["target_directory"])
    lib = target / "release" / LIB_NAME
    if not lib.is_file():
        raise RuntimeError(f"cargo finished but {lib} does not exist")
    return lib


def _stripped_copy(lib: Path, into: Path) -> Path:
    """A copy of the library without debug information (libcairn is built with `debug = 1`)."""
    out = into / LIB_NAME
    shutil.copyfile(lib, out)
    if os.environ.get("CAIRN_NO_STRIP"):
        return out
    strip = shutil.which("strip")
    if strip:
        r = subprocess.run([strip, "--strip-debug", str(out)], capture_output=True)
        if r.returncode != 0:  # an unusable strip: bundle the library as it is
            shutil.copyfile(lib, out)
    return out


# ---------------------------------------------------------------------------------------------
# Wheels


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _package_files() -> list[tuple[str, Path]]:
    """(name in the wheel, source file) for every file of src/cairn."""
    src = PACKAGE_DIR / "src"
    files = []
    for path in sorted((src / "cairn").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        if path.name == LIB_NAME:  # an editable install's copy; the wheel gets a fresh one
            continue
        files.append((path.relative_to(src).as_posix(), path))
    return files


def _write_wheel(wheel_directory: str, entries: list[tuple[str, bytes]], tag: str) -> str:
    name, version = _dist_name(), _version()
    dist_info = f"{name}-{version}.dist-info"
    wheel_name = f"{name}-{version}-{tag}.whl"
    wheel_meta = (
        "Wheel-Version: 1.0\n"
        "Generator: cairn_build\n"
        f"Root-Is-Purelib: {'true' if tag.endswith('-any') else 'false'}\n"
        f"Tag: {tag}\n"
    )
    entries = entries + [
        (f"{dist_info}/METADATA", _metadata().encode()),
        (f"{dist_info}/WHEEL", wheel_meta.encode()),
    ]
    record = [_record_line(n, d) for n, d in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    out = Path(wheel_directory) / wheel_name
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, d in entries:
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return wheel_name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 517: builds libcairn and a platform wheel bundling it."""
    lib = _build_library()
    with tempfile.TemporaryDirectory() as tmp:
        bundled = _stripped_copy(lib, Path(tmp))
        entries = [(n, p.read_bytes()) for n, p in _package_files()]
        entries.append((f"cairn/{LIB_NAME}", bundled.read_bytes()))
        entries += _licence_files()
        return _write_wheel(wheel_directory, entries, f"py3-none-{_platform_tag()}")


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: builds libcairn into src/cairn/ and a wheel whose .pth points at src/."""
    lib = _build_library()
    dest = PACKAGE_DIR / "src" / "cairn"
    _stripped_copy(lib, dest)
    pth = (str(PACKAGE_DIR / "src") + "\n").encode()
    return _write_wheel(wheel_directory, [("__editable__.cairn.pth", pth)], f"py3-none-{_platform_tag()}")


def _prepare_metadata(metadata_directory) -> str:
    dist_info = f"{_dist_name()}-{_version()}.dist-info"
    d = Path(metadata_directory) / dist_info
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(_metadata(), encoding="utf-8")
    return dist_info


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """PEP 517: the metadata, without building the library."""
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    """PEP 660: the metadata, without building the library."""
    return _prepare_metadata(metadata_directory)


def get_requires_for_build_wheel(config_settings=None):
    """PEP 517: nothing beyond the standard library (and cargo on PATH)."""
    return []


def get_requires_for_build_editable(config_settings=None):
    """PEP 660: as for a wheel."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    """PEP 517: nothing."""
    return []


# ---------------------------------------------------------------------------------------------
# Source distributions


def _ffi_crates(root: Path) -> list[str]:
    """The workspace members libcairn needs (crates/ffi and its path dependencies)."""
    meta = subprocess.run(
        [_cargo(), "metadata", "--format-version", "1", "--no-deps"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    packages = {p["name"]: p for p in json.loads(meta.stdout)["packages"]}
    wanted, todo = set(), ["cairn-ffi"]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo += [d["name"] for d in packages[name]["dependencies"] if d.get("path")]
    return sorted(
        Path(packages[n]["manifest_path"]).parent.relative_to(root).as_posix() for n in wanted
    )


def build_sdist(sdist_directory, config_settings=None):
    """PEP 517: the Python sources plus the crates libcairn is built from, under `_rust/`.

    The copied workspace lists only those crates as members, so building from the sdist
    needs nothing else of the repository.
    """
    root = _workspace_root()
    name, version = _dist_name(), _version()
    base = f"{name}-{version}"
    out = Path(sdist_directory) / f"{base}.tar.gz"

    def skip(p: Path) -> bool:
        return any(part in ("__pycache__", "target", ".pytest_cache") for part in p.parts) or (
            p.suffix == ".pyc" or p.name == LIB_NAME
        )

    members = _ffi_crates(root)
    cargo_toml = (root / "Cargo.toml").read_text()
    listed = ", ".join(f'"{m}"' for m in members)
    cargo_toml, n = re.subn(r"members\s*=\s*\[[^\]]*\]", f"members = [{listed}]", cargo_toml, count=1)
    if n != 1:
        raise RuntimeError("cannot find `members = [...]` in the workspace Cargo.toml")

    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as tar:

        def add_bytes(arcname: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))

        def add_tree(src: Path, arcprefix: str) -> None:
            for p in sorted(src.rglob("*")):
                rel = p.relative_to(src)
                if p.is_file() and not skip(rel):
                    add_bytes(f"{arcprefix}{rel.as_posix()}", p.read_bytes())

        for item in ("pyproject.toml", "README.md"):
            add_bytes(item, (PACKAGE_DIR / item).read_bytes())
        for d in ("src", "build_backend", "tools", "tests", "examples"):
            if (PACKAGE_DIR / d).is_dir():
                add_tree(PACKAGE_DIR / d, f"{d}/")
        add_bytes(f"{RUST_COPY}/Cargo.toml", cargo_toml.encode())
        if (root / "Cargo.lock").is_file():
            add_bytes(f"{RUST_COPY}/Cargo.lock", (root / "Cargo.lock").read_bytes())
        for lic in sorted(root.glob("LICENSE*")):
            add_bytes(f"{RUST_COPY}/{lic.name}", lic.read_bytes())
        add_tree(root / "include", f"{RUST_COPY}/include/")
        for m in members:
            add_tree(root / m, f"{RUST_COPY}/{m}/")
        add_bytes("PKG-INFO", _metadata().encode())
    return out.name
