//! Shared fixtures: temporary workspaces, a store inside them, and readers of snapshot trees.

use cairn_snapshot::{snapshot, Context, Options, Snapshot};
use cairn_store::{EntryKind, Store, StoreOptions, Tree, TreeEntry, TreeId};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub struct Ws {
    pub dir: tempfile::TempDir,
    pub store: Store,
}

impl Ws {
    pub fn new() -> Ws {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("root")).expect("root");
        let store = Store::open(dir.path().join("store"), StoreOptions::default()).expect("store");
        Ws { dir, store }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn write(&self, rel: &str, content: &[u8]) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }

    pub fn snap(&self, options: &Options) -> Snapshot {
        self.snap_in(options, Context::default())
    }

    /// A snapshot with the resources of `ctx` (a memo, a watcher).
    pub fn snap_in(&self, options: &Options, ctx: Context<'_>) -> Snapshot {
        snapshot(&self.store, &self.root(), "ws", options, ctx).expect("snapshot")
    }

    pub fn entry(&self, snap: &Snapshot, rel: &[u8]) -> Option<TreeEntry> {
        entry_at(&self.store, snap.root, rel)
    }

    pub fn paths(&self, snap: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        list(&self.store, snap.root, b"", &mut out);
        out.sort();
        out
    }

    pub fn temp_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.store.layout().tmp.clone())
            .expect("tmp")
            .map(|e| e.expect("entry").path())
            .collect()
    }
}

pub fn entry_at(store: &Store, root: TreeId, rel: &[u8]) -> Option<TreeEntry> {
    let mut tree: Tree = store.read_tree(&root).expect("tree");
    let parts: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
    for (i, part) in parts.iter().enumerate() {
        let e = tree.get(part)?.clone();
        if i + 1 == parts.len() {
            return Some(e);
        }
        if e.kind != EntryKind::Dir {
            return None;
        }
        tree = store.read_tree(&TreeId(e.id)).expect("subtree");
    }
    None
}

fn list(store: &Store, id: TreeId, prefix: &[u8], out: &mut Vec<String>) {
    let tree = store.read_tree(&id).expect("tree");
    for e in tree.entries() {
        let mut p = prefix.to_vec();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(&e.name);
        if e.kind == EntryKind::Dir {
            out.push(format!("{}/", String::from_utf8_lossy(&p)));
            list(store, TreeId(e.id), &p, out);
        } else {
            out.push(String::from_utf8_lossy(&p).into_owned());
        }
    }
}

pub fn blob(store: &Store, e: &TreeEntry) -> Vec<u8> {
    store.read_object(&e.id).expect("blob").1
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub fn os(p: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(p))
}

/// splitmix64: enough randomness for choosing steps, and reproducible from its seed.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from `CAIRN_SEED` when set, else from the clock; the seed is printed with `what`.
    pub fn from_env(what: &str) -> Rng {
        let seed = std::env::var("CAIRN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        println!("{what}: CAIRN_SEED={seed}");
        eprintln!("{what}: CAIRN_SEED={seed}");
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len() as u64) as usize])
    }
}
