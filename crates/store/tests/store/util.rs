//! Fixtures shared by the tests: stores in temporary directories, snapshots written in one
//! call, deterministic noise, directory walks that never follow links, and child processes.

use cairn_store::gc::GcOptions;
use cairn_store::pack::{Codec, PackIndex};
use cairn_store::retain::{PruneReport, Retention};
use cairn_store::{
    CaptureSettings, Classify, Compression, EntryKind, ErrorKind, Manifest, ObjectId, ObjectKind,
    OperationKind, SnapshotId, Stats, Store, StoreOptions, Tree, TreeEntry, TreeId,
};
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Collection options with no grace period: unreachable objects go at once.
pub fn no_grace() -> GcOptions {
    GcOptions::with_grace(Duration::ZERO)
}

/// Prunes every snapshot that is not protected or pinned, collecting with [`no_grace`].
pub fn prune_all(store: &Store) -> cairn_store::Result<PruneReport> {
    let keep_none = Retention {
        count: Some(0),
        ..Retention::default()
    };
    store.prune(&keep_none, &no_grace())
}

/// A fresh temporary directory.
pub fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// Default options but for `compression`.
pub fn options(compression: Compression) -> StoreOptions {
    let mut o = StoreOptions::default();
    o.compression = compression;
    o
}

/// Opens (creating) the store `<dir>/store` with default options.
pub fn open(dir: &Path) -> Store {
    Store::open(dir.join("store"), StoreOptions::default()).expect("the store opens")
}

/// The kind of the error `r` must be.
pub fn kind<T: std::fmt::Debug>(r: cairn_store::Result<T>) -> ErrorKind {
    r.expect_err("the call must fail").kind()
}

/// `n` bytes of deterministic noise (xorshift), which zstd cannot shrink.
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A manifest of `root` with everything else plain.
pub fn manifest(root: TreeId, label: Option<&str>, created_ms: i64) -> Manifest {
    Manifest {
        root,
        label: label.map(str::to_string),
        created_ms,
        workspace_id: "ws".into(),
        workspace_root: b"/work/ws".to_vec(),
        metadata: "{}".into(),
        capture: CaptureSettings::default(),
        skipped: Vec::new(),
        stats: Stats::default(),
        protected: false,
    }
}

/// A regular file entry, mode 0644.
pub fn file_entry(name: &[u8], id: ObjectId, size: u64) -> TreeEntry {
    TreeEntry {
        name: name.to_vec(),
        kind: EntryKind::File,
        mode: 0o100644,
        size,
        id,
    }
}

/// A snapshot written by [`snapshot`].
#[derive(Debug, Clone)]
pub struct Snap {
    /// Its id.
    pub id: SnapshotId,
    /// Its root tree.
    pub root: TreeId,
    /// The blobs of its files, in the order given.
    pub blobs: Vec<ObjectId>,
}

/// Writes `files` as blobs and a flat tree of them, commits, and writes a manifest, all in one
/// operation.
pub fn snapshot_with(
    store: &Store,
    files: &[(&str, &[u8])],
    m: impl FnOnce(TreeId) -> Manifest,
) -> Snap {
    let op = store
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("an operation begins");
    let w = store.writer(&op);
    let mut entries = Vec::new();
    let mut blobs = Vec::new();
    for (name, bytes) in files {
        let put = w
            .put_blob_from(&mut &bytes[..], bytes.len() as u64)
            .expect("a blob is stored");
        blobs.push(put.id);
        entries.push(file_entry(name.as_bytes(), put.id, put.size));
    }
    let root = w
        .put_tree(&Tree::new(entries).expect("a valid tree"))
        .expect("the tree is stored");
    w.commit().expect("the objects are committed");
    let id = store
        .write_manifest(&op, &m(root))
        .expect("the manifest is written");
    Snap { id, root, blobs }
}

/// [`snapshot_with`] a plain manifest labelled `label`, taken at `created_ms`.
pub fn snapshot(
    store: &Store,
    files: &[(&str, &[u8])],
    label: Option<&str>,
    created_ms: i64,
) -> Snap {
    snapshot_with(store, files, |root| manifest(root, label, created_ms))
}

/// Writes `blobs` (in one new pack) without any manifest naming them.
pub fn write_unreachable(store: &Store, blobs: &[&[u8]]) -> Vec<ObjectId> {
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("an operation begins");
    let w = store.writer(&op);
    let ids = blobs
        .iter()
        .map(|b| w.put(ObjectKind::Blob, b).expect("a blob is stored").id)
        .collect();
    w.commit().expect("the objects are committed");
    ids
}

/// The codec of every object in the store's packs.
pub fn pack_codecs(store: &Store) -> std::collections::HashMap<ObjectId, Codec> {
    files_ending(&store.layout().packs, ".idx")
        .iter()
        .flat_map(|p| {
            PackIndex::load(p)
                .expect("the index loads")
                .entries()
                .map(|e| e.expect("the index reads"))
                .collect::<Vec<_>>()
        })
        .map(|e| (e.id, e.codec))
        .collect()
}

/// The paths in `dir` (not below it) whose names end with `suffix`, sorted.
pub fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the directory lists")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    out.sort();
    out
}

/// Every path below `dir` (itself included) with its `lstat` metadata; links are not followed.
pub fn walk(dir: &Path) -> Vec<(PathBuf, Metadata)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).expect("lstat");
        if m.is_dir() {
            for e in std::fs::read_dir(&p).expect("the directory lists") {
                stack.push(e.expect("an entry").path());
            }
        }
        out.push((p, m));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Polls `done` every 10 ms until it holds; panics after `timeout` saying `what` never happened.
pub fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The environment variable that tells a helper test it was started by [`helper`].
pub const HELPER_ENV: &str = "CAIRN_STORE_TEST_HELPER_DIR";

/// The directory a helper test was given, or `None` when it runs on its own (then it does
/// nothing: it is ignored by default and only meaningful as a child process).
pub fn helper_dir() -> Option<PathBuf> {
    std::env::var_os(HELPER_ENV).map(PathBuf::from)
}

/// A command re-running this test binary on the single ignored helper test `name` (its full
/// path, `module::test`), with `dir` passed through [`HELPER_ENV`].
pub fn helper(name: &str, dir: &Path) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([
        name,
        "--exact",
        "--ignored",
        "--test-threads=1",
        "--nocapture",
    ])
    .env(HELPER_ENV, dir)
    .stdin(Stdio::null());
    cmd
}

/// A child process killed (SIGKILL) and reaped when dropped, so a failing test leaves none behind.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The bytes of the test vector that `docs/FORMAT.md` prints in the first `text` code block after
/// the line containing `heading`, as hex: the leading hex tokens of each line, joined (the rest of
/// a line is its description).
pub fn doc_vector(heading: &str) -> String {
    let doc = format_doc();
    let mut lines = doc.lines().skip_while(|l| !l.contains(heading));
    assert!(lines.next().is_some(), "FORMAT.md has no '{heading}'");
    let mut lines = lines.skip_while(|l| *l != "```text").skip(1);
    let mut hex = String::new();
    for line in lines.by_ref().take_while(|l| *l != "```") {
        for token in line.split_whitespace() {
            if !token
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                break;
            }
            hex.push_str(token);
        }
    }
    hex
}

/// The text of `docs/FORMAT.md`.
pub fn format_doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
    std::fs::read_to_string(path).expect("docs/FORMAT.md reads")
}
