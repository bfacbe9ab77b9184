//! Shared pieces: workspaces made from a seed, exact pictures of trees on disk and in the store,
//! child processes that report on stdout, a small seeded random generator, and the figures
//! each test writes for `docs/RELIABILITY.md`.

use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_store::{EntryKind, ObjectId, Store, StoreOptions, TreeId};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The workspace id every test uses, so that copies of a workspace share their journals and
/// stat cache.
pub const WS_ID: &str = "rel-ws";

/// Whether the long suites run (`CAIRN_LONG=1`).
pub fn long() -> bool {
    std::env::var("CAIRN_LONG").is_ok_and(|v| v == "1")
}

/// Whether this process runs as root (needed for mounts and for changing user).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A seeded generator (the benches' SplitMix64), reproducible from the seed a test prints.
pub struct Rng(cairn_benches::rng::Rng);

impl Rng {
    /// Seeded from `CAIRN_SEED` when set, else from the clock; the seed is printed.
    pub fn from_env(test: &str) -> Rng {
        let seed = std::env::var("CAIRN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        println!("{test}: CAIRN_SEED={seed}");
        Rng::new(seed)
    }

    /// A generator with a fixed seed.
    pub fn new(seed: u64) -> Rng {
        Rng(cairn_benches::rng::Rng::new(seed))
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// A duration uniformly in `[0, max]`.
    pub fn delay(&mut self, max: Duration) -> Duration {
        let micros = max.as_micros() as u64;
        Duration::from_micros(self.below(micros + 1))
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.0.next_u64().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}

/// A temporary directory for a test: on `/dev/shm` (a tmpfs) when there is one, so that the
/// crash loops do not spend their time in `fsync` (a SIGKILL leaves the page cache as it is, so
/// a tmpfs shows the same outcomes as a disk), else in the default temporary directory.
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let writable = std::fs::metadata(shm).is_ok_and(|m| m.is_dir())
        && tempfile::Builder::new()
            .prefix("cairn-probe-")
            .tempdir_in(shm)
            .is_ok();
    let builder = {
        let mut b = tempfile::Builder::new();
        b.prefix("cairn-rel-");
        b
    };
    if writable {
        builder.tempdir_in(shm).expect("a directory in /dev/shm")
    } else {
        builder.tempdir().expect("a temporary directory")
    }
}

/// Writes `content` at `rel` under `root`, making parent directories.
pub fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir -p");
    std::fs::write(&p, content).expect("write a file");
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Fills the empty directory `root` with a source-like tree, version `variant`: about 260
/// files in nested directories (a quarter of them change from one variant to the next, and
/// some modes), a 160 KiB file stored as a large object (changing every other variant), a
/// symlink, a non-UTF-8 name, a path that is a file in even variants and a directory in odd
/// ones, a directory only this variant has, a read-only directory and an empty one.
pub fn populate(root: &Path, variant: u32) {
    for d in 0..10u32 {
        for i in 0..25u32 {
            let mut text = format!("// module {d}, file {i}\n");
            if (d + i + variant) % 4 == 0 {
                text.push_str(&format!("// edited in variant {variant}\n"));
            }
            for line in 0..(20 + (d * 7 + i * 13) % 60) {
                text.push_str(&format!("pub fn f{line}() -> u32 {{ {} }}\n", line * d + i));
            }
            let rel = format!("src/mod{d}/f{i}.rs");
            write(root, &rel, text.as_bytes());
            if (i + variant) % 7 == 0 {
                chmod(&root.join(&rel), 0o755);
            }
        }
    }
    for i in 0..5 {
        write(
            root,
            &format!("only-{variant}/n{i}.txt"),
            format!("only in variant {variant}: {i}\n").as_bytes(),
        );
    }
    let mut rng = Rng::new(u64::from(variant / 2) + 7);
    write(root, "assets/big.bin", &rng.bytes(160 * 1024));
    std::fs::create_dir_all(root.join("links")).expect("links");
    std::os::unix::fs::symlink(
        format!("../src/mod{}/f0.rs", variant % 3),
        root.join(format!("links/l{}", variant % 3)),
    )
    .expect("symlink");
    let odd_name = [
        b"caf\xe9-".as_slice(),
        &[b'0' + (variant % 2) as u8],
        b".txt",
    ]
    .concat();
    std::fs::write(
        root.join(std::ffi::OsStr::from_bytes(&odd_name)),
        b"not UTF-8\n",
    )
    .expect("odd name");
    if variant % 2 == 0 {
        write(root, "swap", b"a file in even variants\n");
    } else {
        write(root, "swap/inner.txt", b"a directory in odd variants\n");
    }
    write(root, "ro/readme.txt", b"read-only directory\n");
    chmod(&root.join("ro"), 0o555);
    std::fs::create_dir_all(root.join("empty")).expect("empty dir");
}

/// Removes everything under `root` (making read-only directories writable first).
pub fn clear(root: &Path) {
    for e in std::fs::read_dir(root).expect("list root") {
        let p = e.expect("entry").path();
        let m = std::fs::symlink_metadata(&p).expect("lstat");
        if m.is_dir() {
            make_writable(&p);
            std::fs::remove_dir_all(&p).expect("rm -r");
        } else {
            std::fs::remove_file(&p).expect("rm");
        }
    }
}

fn make_writable(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        chmod(&d, 0o755);
        for e in std::fs::read_dir(&d).expect("list").flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(e.path());
            }
        }
    }
}

/// Copies `from` to `to` exactly (modes, symlinks, times), with `cp -a`.
pub fn copy_dir(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// What one path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A regular file: its permission bits and the id (SHA-256) of its content.
    File(u32, ObjectId),
    /// A symlink and its target.
    Link(Vec<u8>),
    /// A directory and its permission bits.
    Dir(u32),
}

/// A whole tree: every path, relative, as raw bytes.
pub type Picture = BTreeMap<Vec<u8>, Node>;

/// The tree under `root` as it is on disk. Sockets and FIFOs are left out (a snapshot leaves
/// them out too).
pub fn picture(root: &Path) -> Picture {
    let mut out = Picture::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let dir = root.join(&rel);
        for e in std::fs::read_dir(&dir).expect("list a directory") {
            let e = e.expect("an entry");
            let rel = rel.join(e.file_name());
            let key = rel.as_os_str().as_bytes().to_vec();
            let p = root.join(&rel);
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            let ft = m.file_type();
            if ft.is_symlink() {
                let t = std::fs::read_link(&p).expect("readlink");
                out.insert(key, Node::Link(t.as_os_str().as_bytes().to_vec()));
            } else if ft.is_dir() {
                out.insert(key, Node::Dir(m.mode() & 0o7777));
                todo.push(rel);
            } else if ft.is_file() {
                let content = std::fs::read(&p).expect("read a file");
                out.insert(key, Node::File(m.mode() & 0o7777, ObjectId::of(&content)));
            }
        }
    }
    out
}

/// The tree a snapshot's root tree describes, read from the store, in the same form as
/// [`picture`].
pub fn tree_picture(store: &Store, root: TreeId) -> Picture {
    let mut out = Picture::new();
    let mut todo = vec![(Vec::new(), root)];
    while let Some((prefix, id)) = todo.pop() {
        let tree = store.read_tree(&id).expect("a tree reads back");
        for e in tree.entries() {
            let mut key = prefix.clone();
            if !key.is_empty() {
                key.push(b'/');
            }
            key.extend_from_slice(&e.name);
            let node = match e.kind {
                EntryKind::File => Node::File(e.permissions(), e.id),
                EntryKind::Symlink => {
                    Node::Link(store.read_object(&e.id).expect("a symlink target").1)
                }
                EntryKind::Dir => {
                    todo.push((key.clone(), TreeId(e.id)));
                    Node::Dir(e.permissions())
                }
            };
            out.insert(key, node);
        }
    }
    out
}

/// Temporary files a restore stages in the workspace (`.cairn-tmp-*`), anywhere under `root`.
pub fn staged_leftovers(root: &Path) -> Vec<String> {
    picture(root)
        .into_keys()
        .filter(|k| {
            let name = k.rsplit(|&b| b == b'/').next().unwrap_or(k);
            name.starts_with(b".cairn-tmp-")
        })
        .map(|k| String::from_utf8_lossy(&k).into_owned())
        .collect()
}

/// The names in a directory, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// How every test opens a store: blobs over 64 KiB are large objects (files of their own), so
/// that the small trees of these tests exercise both ways of storing a blob.
pub fn store_options() -> StoreOptions {
    StoreOptions {
        inline_max_bytes: 64 << 10,
        ..StoreOptions::default()
    }
}

/// Workspace options for a root whose store lives at `store`, with the shared id.
pub fn ws_options(store: &Path) -> WorkspaceOptions {
    WorkspaceOptions {
        store: Some(store.to_path_buf()),
        id: Some(WS_ID.into()),
        store_options: store_options(),
        ..WorkspaceOptions::default()
    }
}

/// Opens the workspace at `dir/root` with its store at `dir/store` (completing any restore a
/// crash left pending).
pub fn open_ws(dir: &Path) -> Workspace {
    Workspace::open(dir.join("root"), ws_options(&dir.join("store"))).expect("workspace opens")
}

/// Opens the store at `path`, which must exist.
pub fn open_store(path: &Path) -> Store {
    Store::open(
        path,
        StoreOptions {
            create: false,
            ..store_options()
        },
    )
    .expect("store opens")
}

/// The store's snapshots, sorted.
pub fn snapshot_ids(store: &Store) -> Vec<cairn_store::SnapshotId> {
    let mut ids = store.snapshot_ids().expect("snapshots list");
    ids.sort();
    ids
}

/// A child process of this test binary, running one of the `child` module's jobs, whose
/// `CAIRN-CHILD` lines on stdout are read by a thread.
pub struct Spawned {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

/// The prefix of the lines a child reports with.
pub const TAG: &str = "CAIRN-CHILD ";

/// A command that runs job `job` of the `child` module in a child process of this binary.
pub fn child_command(job: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args(["--exact", "child::child", "--ignored", "--nocapture"])
        .args(["--test-threads=1", "-q"])
        .env("CAIRN_REL_JOB", job)
        .env("CAIRN_REL_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

impl Spawned {
    /// Starts `cmd` (from [`child_command`]).
    pub fn start(mut cmd: Command) -> Spawned {
        let mut child = cmd.spawn().expect("the child starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix(TAG) {
                    if tx.send(rest.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        Spawned {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// Waits for a line starting with `word` (or `ERR`, a failure that ends the wait too);
    /// `None` when the child ends or `timeout` passes.
    pub fn wait_for(&mut self, word: &str, timeout: Duration) -> Option<String> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    let first = line.split(' ').next();
                    if first == Some(word) || first == Some("ERR") {
                        return Some(line);
                    }
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    return None
                }
            }
        }
    }

    /// Sends SIGKILL (if the child still runs) and reaps it.
    pub fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().expect("the child is reaped")
    }

    /// Waits for the child to end by itself.
    pub fn wait(&mut self) -> ExitStatus {
        self.child.wait().expect("the child is reaped")
    }

    /// Every line the child reported (after it ended), and its standard error.
    pub fn finish(mut self) -> (Vec<String>, String) {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(10)) {
            self.seen.push(line);
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        (std::mem::take(&mut self.seen), err)
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `status` is a death by SIGKILL.
pub fn killed(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(9)
}

/// Writes a test's figures to `<target>/tmp/reliability/<name>.txt` (printed by
/// `scripts/test-reliability`) and to stdout.
pub fn figures(name: &str, text: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reliability");
    std::fs::create_dir_all(&dir).expect("figures directory");
    let mode = if long() { "long" } else { "default" };
    let body = format!("{name} ({mode} run): {text}\n");
    std::fs::write(dir.join(format!("{name}.txt")), &body).expect("figures written");
    print!("{body}");
}

/// A tmpfs mounted for a test and unmounted when dropped.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it) at `dir`, which is created.
    /// `None`, with the reason printed, when this process may not mount.
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        if !is_root() {
            println!("skipped: mounting a tmpfs needs root, and this test runs as a user");
            return None;
        }
        std::fs::create_dir_all(dir).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755")])
            .arg("tmpfs")
            .arg(dir)
            .status();
        match status {
            Ok(s) if s.success() => Some(Tmpfs(dir.to_path_buf())),
            other => {
                println!("skipped: mount -t tmpfs failed here ({other:?})");
                None
            }
        }
    }

    /// Remounts it read-only (or read-write again).
    pub fn remount(&self, read_only: bool) {
        let opt = if read_only {
            "remount,ro"
        } else {
            "remount,rw"
        };
        let status = Command::new("mount")
            .args(["-o", opt])
            .arg(&self.0)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount -o {opt}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
