//! Helpers shared by the remote tests: workspaces over a remote, trees to compare.
#![allow(dead_code)]

use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_store::{Remote, RemoteConfig, StoreOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Store options over `remote`, with a short lease so tests see renewals.
pub fn options_over(remote: Arc<dyn Remote>) -> StoreOptions {
    StoreOptions {
        remote: Some(RemoteConfig {
            remote,
            lease_ttl: Duration::from_secs(30),
        }),
        inline_max_bytes: 64 << 10,
        ..StoreOptions::default()
    }
}

/// A workspace rooted at `root` whose store is the cache `cache` of `remote`, as one machine
/// of a fleet would open it.
pub fn workspace(root: &Path, cache: &Path, id: &str, store_options: StoreOptions) -> Workspace {
    std::fs::create_dir_all(root).expect("workspace root");
    Workspace::open(
        root,
        WorkspaceOptions {
            store: Some(cache.to_path_buf()),
            id: Some(id.to_string()),
            store_options,
            ..WorkspaceOptions::default()
        },
    )
    .expect("workspace opens over the remote")
}

/// Writes `n` files of varied sizes (one larger than the inline limit) under `root`.
pub fn populate(root: &Path, n: usize) {
    for i in 0..n {
        let dir = root.join(format!("src/mod{}", i % 7));
        std::fs::create_dir_all(&dir).expect("dir");
        let body: Vec<u8> = (0..(200 + i * 37))
            .map(|k| ((k * 31 + i * 7) % 251) as u8)
            .collect();
        std::fs::write(dir.join(format!("file{i}.rs")), body).expect("file");
    }
    let big: Vec<u8> = (0..200_000u32).map(|k| (k % 253) as u8).collect();
    std::fs::write(root.join("big.bin"), big).expect("big file");
}

/// Changes `n` files written by [`populate`] (a per-message edit).
pub fn edit(root: &Path, n: usize, round: usize) {
    for i in 0..n {
        let p = root.join(format!("src/mod{}/file{i}.rs", i % 7));
        let mut body = std::fs::read(&p).expect("read");
        body.extend_from_slice(format!("// edit {round}\n").as_bytes());
        std::fs::write(&p, body).expect("write");
    }
}

/// Every file, directory and symlink below `root` (but `.cairn`), with its content.
pub fn tree_of(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list") {
            let e = e.expect("entry");
            if e.file_name() == ".cairn" {
                continue;
            }
            let p = e.path();
            let rel = p.strip_prefix(root).expect("below root").to_path_buf();
            let ft = e.file_type().expect("type");
            if ft.is_dir() {
                out.insert(rel, None);
                stack.push(p);
            } else {
                out.insert(rel, Some(std::fs::read(&p).expect("read")));
            }
        }
    }
    out
}

/// Asserts that two trees hold the same paths with the same bytes.
pub fn assert_same_tree(a: &Path, b: &Path) {
    let ta = tree_of(a);
    let tb = tree_of(b);
    let ka: Vec<_> = ta.keys().collect();
    let kb: Vec<_> = tb.keys().collect();
    assert_eq!(ka, kb, "the two trees hold different paths");
    for (k, v) in &ta {
        assert!(tb[k] == *v, "{} differs", k.display());
    }
    assert!(!ta.is_empty(), "the trees compared are not empty");
}

/// `n` incompressible bytes (xorshift64 from `seed`).
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
