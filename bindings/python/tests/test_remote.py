"""A remote store through the binding: ``Workspace(root, store=cache, remote=url,
remote_options=...)``. A snapshot from one workspace into a ``file://`` remote with its own
cache is restored byte for byte into a second workspace with another cache; ``gc`` runs the
remote's collector; ``trim_cache``; the errors of a bad remote; the same against a real Garage
cluster when its binary is built (``scripts/garage install``, which ``scripts/test-garage``
runs); and a fork with files of machine A's checkpoints onto machine B, sharing only the remote
and a PostgreSQL thread database (``CAIRN_TEST_PG_URL``, set by ``scripts/test``)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PACKAGE_DIR, write

import cairn

REPO = PACKAGE_DIR.parent.parent


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under ``root``: relative path -> bytes (None: a directory)."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = Path(p).read_bytes()
    return out


def populate(root: Path, files: int) -> None:
    """``files`` files of distinct contents in nested directories, a binary one and an empty one."""
    for i in range(files):
        write(root, f"src/d{i % 9}/f{i}.txt", f"file {i}\n" * (1 + i % 50))
    write(root, "bin/blob", bytes(range(256)) * 40)
    write(root, "empty", b"")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def file_remote(tmp_path: Path) -> str:
    remote = tmp_path / "remote"
    remote.mkdir()
    return f"file://{remote}"


# -- a file:// remote ------------------------------------------------------------------------------


def roundtrip(tmp_path: Path, url: str, options: cairn.RemoteOptions | None = None) -> None:
    """Machine A snapshots into ``url`` through its cache; machine B, with its own cache and
    an empty root, lists it and restores it byte for byte, also after trimming its cache."""
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    a_root.mkdir()
    b_root.mkdir()
    populate(a_root, 120)
    with cairn.Workspace(a_root, store=tmp_path / "cache-a", remote=url, remote_options=options) as a:
        assert a.info().remote is not None and a.info().remote.split("://")[0] == url.split("://")[0]
        snap = a.snapshot("from-a")
    with cairn.Workspace(b_root, store=tmp_path / "cache-b", remote=url, remote_options=options) as b:
        assert [s.id for s in b.list()] == [snap.id]
        b.restore("from-a")
        assert tree(b_root) == tree(a_root)

        trim = b.trim_cache(0)
        assert isinstance(trim, cairn.CacheTrim)
        assert trim.removed_files > 0 and trim.cached_bytes == 0
        shutil.rmtree(b_root)
        b_root.mkdir()
        b.restore(snap.id)  # fetched from the remote again
        assert tree(b_root) == tree(a_root)

        report = b.gc()
        assert report.remote is not None, report
        assert report.remote.snapshots >= 1 and report.remote.packs_deleted == 0
        dry = b.gc(dry_run=True)
        assert dry.dry_run and dry.remote is not None


def test_a_snapshot_into_a_file_remote_is_restored_byte_for_byte_into_another_workspace_with_its_own_cache(tmp_path):
    url = file_remote(tmp_path)
    roundtrip(tmp_path, url)
    assert any((tmp_path / "remote").rglob("*")), "the remote holds the store"


def test_trim_cache_of_a_workspace_without_a_remote_is_unsupported(ws):
    assert ws.info().remote is None
    with pytest.raises(cairn.UnsupportedError):
        ws.trim_cache(0)
    with pytest.raises(ValueError):
        ws.trim_cache(-1)


def test_remote_options_without_a_remote_are_refused(root, tmp_path):
    with pytest.raises(cairn.InvalidArgumentError, match="without a remote"):
        cairn.Workspace(root, store=tmp_path / "s", remote_options=cairn.RemoteOptions(region="x"))


def test_an_unreachable_endpoint_raises_an_io_error_within_seconds_naming_the_url_and_not_the_secret(root, tmp_path):
    secret = "s3cr3t-never-shown-0123456789"
    options = cairn.RemoteOptions(
        endpoint=f"http://127.0.0.1:{free_port()}",
        region="garage",
        access_key_id="GK0123456789abcdef",
        secret_access_key=secret,
    )
    assert secret not in repr(options)
    started = time.monotonic()
    with pytest.raises(cairn.CairnIOError) as info:
        cairn.Workspace(root, store=tmp_path / "cache", remote="s3://fleet/team-a", remote_options=options)
    took = time.monotonic() - started
    assert took < 10, f"took {took:.1f} s"
    assert "s3://fleet/team-a" in str(info.value)
    assert secret not in str(info.value)


def test_a_url_with_credentials_in_it_never_shows_them(root, tmp_path):
    with pytest.raises(cairn.CairnError) as info:
        cairn.Workspace(root, store=tmp_path / "cache", remote="nosuch://user:hunter2@bucket/x")
    assert "hunter2" not in str(info.value)


# -- a real Garage cluster -------------------------------------------------------------------------


def garage_bin() -> Path | None:
    given = os.environ.get("CAIRN_GARAGE")
    p = Path(given) if given else REPO / "target" / "garage" / "bin" / "garage"
    return p if p.is_file() and os.access(p, os.X_OK) else None


@dataclass
class Garage:
    """A 3-node Garage cluster on loopback ports (replication_factor = 3), as the Rust suite's
    crates/remote/tests/common/garage.rs starts it, with bucket ``cairn`` and a key on it."""

    bin: Path
    dir: Path
    configs: list[Path]
    procs: list[subprocess.Popen]
    endpoint: str = ""
    key_id: str = ""
    secret: str = ""

    def run(self, i: int, *args: str) -> str:
        """``garage -c <node i> args``, retried for up to 30 s while the cluster settles."""
        deadline = time.monotonic() + 30
        while True:
            r = subprocess.run([str(self.bin), "-c", str(self.configs[i]), *args], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout
            if time.monotonic() > deadline:
                raise RuntimeError(f"garage {args} failed: {r.stdout}\n{r.stderr}")
            time.sleep(0.3)

    def options(self) -> cairn.RemoteOptions:
        return cairn.RemoteOptions(endpoint=self.endpoint, region="garage", access_key_id=self.key_id, secret_access_key=self.secret)

    @classmethod
    def start(cls, bin: Path, dir: Path) -> Garage:
        rpc_secret = secrets.token_hex(32)
        g = cls(bin, dir, [], [])
        ports = []
        for i in range(3):
            node = dir / f"node{i}"
            (node / "meta").mkdir(parents=True)
            (node / "data").mkdir()
            rpc, s3 = free_port(), free_port()
            ports.append((rpc, s3))
            config = node / "garage.toml"
            config.write_text(
                f'metadata_dir = "{node / "meta"}"\ndata_dir = "{node / "data"}"\ndb_engine = "sqlite"\n'
                f'replication_factor = 3\nrpc_bind_addr = "127.0.0.1:{rpc}"\nrpc_public_addr = "127.0.0.1:{rpc}"\n'
                f'rpc_secret = "{rpc_secret}"\nbootstrap_peers = []\n\n[s3_api]\ns3_region = "garage"\n'
                f'api_bind_addr = "127.0.0.1:{s3}"\nroot_domain = ".s3.garage.localhost"\n'
            )
            g.configs.append(config)
        g.endpoint = f"http://127.0.0.1:{ports[0][1]}"
        try:
            for i, (rpc, _) in enumerate(ports):
                log = open(g.configs[i].with_name("garage.log"), "ab")  # noqa: SIM115 - the process keeps it
                g.procs.append(
                    subprocess.Popen(
                        [str(bin), "-c", str(g.configs[i]), "server"],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=log,
                        env={**os.environ, "RUST_LOG": "warn"},
                    )
                )
                log.close()
                deadline = time.monotonic() + 20
                while True:
                    try:
                        socket.create_connection(("127.0.0.1", rpc), timeout=1).close()
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"garage node {i} did not start") from None
                        time.sleep(0.05)
            ids = [g.run(i, "node", "id", "-q").strip() for i in range(3)]
            for node_id in ids[1:]:
                g.run(0, "node", "connect", node_id)
            for node_id in ids:
                g.run(0, "layout", "assign", "-z", "dc1", "-c", "1GB", node_id.split("@")[0])
            g.run(0, "layout", "apply", "--version", "1")
            g.run(0, "bucket", "create", "cairn")
            key = g.run(0, "key", "create", "cairn-key")
            fields = {}
            for line in key.splitlines():
                k, sep, v = line.partition(":")
                if sep:
                    fields[k.strip().lower()] = v.strip()
            g.key_id, g.secret = fields["key id"], fields["secret key"]
            g.run(0, "bucket", "allow", "--read", "--write", "--owner", "cairn", "--key", "cairn-key")
        except BaseException:
            g.stop()
            raise
        return g

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


@pytest.fixture
def garage() -> Iterator[Garage]:
    bin = garage_bin()
    if bin is None:
        reason = "the Garage binary is not built (scripts/garage install; scripts/test-garage builds it): the Garage tests are skipped"
        print(reason)
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="cairn-py-garage-") as d:
        g = Garage.start(bin, Path(d))
        try:
            yield g
        finally:
            g.stop()


def test_a_snapshot_into_garage_is_restored_byte_for_byte_into_another_workspace_with_its_own_cache(garage, tmp_path):
    roundtrip(tmp_path, "s3://cairn/py-roundtrip", garage.options())


def test_bad_keys_against_garage_raise_denied_within_seconds_without_the_secret(garage, root, tmp_path):
    bad = cairn.RemoteOptions(endpoint=garage.endpoint, region="garage", access_key_id=garage.key_id, secret_access_key="0" * 64)
    started = time.monotonic()
    with pytest.raises(cairn.DeniedError) as info:
        cairn.Workspace(root, store=tmp_path / "cache", remote="s3://cairn/py-denied", remote_options=bad)
    assert time.monotonic() - started < 10
    assert "s3://cairn/py-denied" in str(info.value) and "0" * 64 not in str(info.value)
    assert garage.secret not in str(info.value)


# -- a fleet: machine A and machine B share only the remote and a PostgreSQL thread database ------


def pg_url() -> str:
    url = os.environ.get("CAIRN_TEST_PG_URL")
    if not url:
        reason = "CAIRN_TEST_PG_URL is not set (scripts/test starts a PostgreSQL server and sets it): the fleet test is skipped"
        print(reason)
        pytest.skip(reason)
    return url


def fork_onto_another_machine(tmp_path: Path, url: str, options: cairn.RemoteOptions | None) -> None:
    db = pg_url()
    run_id = f"{os.getpid()}-{time.time_ns()}"
    chat, chat_b = f"py-fleet-{run_id}", f"py-fleet-b-{run_id}"
    # Workspace ids of their own too: the database may be shared with other runs.
    id_a, id_b = f"a-{run_id}", f"b-{run_id}"
    machine_a, machine_b = tmp_path / "machine-a", tmp_path / "machine-b"

    # Machine A: the agent works, a checkpoint before each user message goes into the remote.
    a_root = machine_a / "project"
    a_root.mkdir(parents=True)
    populate(a_root, 60)
    expected = {}
    with (
        cairn.Workspace(a_root, store=machine_a / "cache", id=id_a, remote=url, remote_options=options) as a,
        cairn.Threads(db, workspace=a, checkpoints=True) as threads,
    ):
        threads.create(chat)
        threads.append(chat, "user", "first")
        write(a_root, "src/d0/f0.txt", "changed in turn one\n")
        write(a_root, "new.txt", "made in turn one\n")
        done = threads.append(chat, "assistant", "done")
        expected["done"] = tree(a_root)
        threads.append(chat, "user", "second")  # its checkpoint holds the files as they were at `done`
        write(a_root, "src/d1/f1.txt", "changed in turn two\n")
        (a_root / "new.txt").unlink()
        threads.append(chat, "assistant", "done again")

    # Machine B: another root and cache; it reaches A only through the remote and the database.
    b_root = machine_b / "project"
    b_root.mkdir(parents=True)
    with (
        cairn.Workspace(b_root, store=machine_b / "cache", id=id_b, remote=url, remote_options=options) as b,
        cairn.Threads(db, workspace=b, checkpoints=True) as threads,
    ):
        report = threads.fork(chat, done.entry, files=True, new_thread_id=chat_b, workspace=b, source_workspace_id=id_a)
        assert report.thread_id == chat_b and report.files is not None
        assert tree(b_root) == expected["done"]
        assert [e.text for e in threads.log(chat_b)] == ["first", "done"]
        # B goes on from there: its own checkpoint, into the same remote.
        write(b_root, "b.txt", "B's own work\n")
        on_b = threads.append(chat_b, "user", "go on, on B")
        assert on_b.checkpoint is not None and on_b.checkpoint.workspace_id == id_b
    # Machine A sees B's checkpoint in the remote, through its own cache.
    with cairn.Workspace(a_root, store=machine_a / "cache", id=id_a, remote=url, remote_options=options) as a:
        assert on_b.checkpoint.snapshot_id in [s.id for s in a.list()]


def test_a_fork_with_files_of_machine_a_checkpoints_lands_on_machine_b_sharing_only_the_remote_and_postgres(tmp_path):
    fork_onto_another_machine(tmp_path, file_remote(tmp_path), None)


def test_the_same_fork_through_garage(garage, tmp_path):
    fork_onto_another_machine(tmp_path, "s3://cairn/py-fleet", garage.options())


def test_a_fork_from_a_workspace_that_took_no_checkpoint_of_the_thread_is_a_validation_error(tmp_path):
    db = pg_url()
    chat = f"py-fleet-none-{os.getpid()}-{time.time_ns()}"
    url = file_remote(tmp_path)
    root = tmp_path / "b"
    root.mkdir()
    with (
        cairn.Workspace(root, store=tmp_path / "cache", remote=url) as b,
        cairn.Threads(db, workspace=b) as threads,
    ):
        threads.create(chat)
        first = threads.append(chat, "user", "hello")
        with pytest.raises(cairn.ValidationError, match="no checkpoint taken in workspace elsewhere"):
            threads.fork(chat, first.entry, files=True, workspace=b, source_workspace_id="elsewhere")
