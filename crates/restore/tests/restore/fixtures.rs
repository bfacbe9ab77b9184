//! Fixtures: workspaces in temporary directories and exact pictures of trees.

use cairn_restore::{Workspace, WorkspaceOptions};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub struct Fx {
    pub dir: tempfile::TempDir,
    pub ws: Workspace,
}

impl Fx {
    pub fn new() -> Fx {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(dir.path().join("root")).expect("root");
        let ws = open(dir.path());
        Fx { dir, ws }
    }

    pub fn root(&self) -> PathBuf {
        self.ws.root().to_path_buf()
    }

    pub fn write(&self, rel: &str, content: &[u8]) {
        write(&self.root(), rel, content);
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.root().join(rel)).expect("read")
    }

    pub fn snap(&self) -> cairn_snapshot::Snapshot {
        self.ws
            .snapshot(&self.ws.snapshot_options(), Default::default())
            .expect("snapshot")
            .snapshot
    }

    pub fn picture(&self) -> BTreeMap<Vec<u8>, Node> {
        picture(&self.root())
    }

    /// Restores the whole of `snap` with the default options.
    pub fn restore(&self, snap: &cairn_store::SnapshotId) -> cairn_restore::Report {
        self.ws
            .restore(
                snap,
                &Default::default(),
                &Default::default(),
                Default::default(),
            )
            .expect("restore")
    }
}

pub fn open(dir: &Path) -> Workspace {
    Workspace::open(
        dir.join("root"),
        WorkspaceOptions {
            store: Some(dir.join("store")),
            ..WorkspaceOptions::default()
        },
    )
    .expect("open workspace")
}

pub fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, content).expect("write");
}

/// What a path holds, exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { mode: u32, content: Vec<u8> },
    Link { target: Vec<u8> },
    Dir { mode: u32 },
}

/// Every path under `root` (the store excluded when it sits inside), with its content and mode.
pub fn picture(root: &Path) -> BTreeMap<Vec<u8>, Node> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<u8>, Node>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let rel = p
            .strip_prefix(root)
            .expect("under root")
            .as_os_str()
            .as_bytes()
            .to_vec();
        if rel == b".cairn" {
            continue;
        }
        let m = std::fs::symlink_metadata(&p).expect("lstat");
        if m.file_type().is_symlink() {
            out.insert(
                rel,
                Node::Link {
                    target: std::fs::read_link(&p)
                        .expect("readlink")
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                },
            );
        } else if m.is_dir() {
            out.insert(
                rel,
                Node::Dir {
                    mode: m.mode() & 0o7777,
                },
            );
            walk(root, &p, out);
        } else if m.is_file() {
            out.insert(
                rel,
                Node::File {
                    mode: m.mode() & 0o7777,
                    content: std::fs::read(&p).expect("read"),
                },
            );
        }
    }
}

pub fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

pub fn mtime_ns(p: &Path) -> i128 {
    let m = std::fs::symlink_metadata(p).expect("stat");
    m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128
}

/// Temporary files a restore may leave: `.cairn-tmp-*` anywhere under `root`.
pub fn temp_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_name().as_bytes().starts_with(b".cairn-tmp-") {
                out.push(p.clone());
            }
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(p);
            }
        }
    }
    out
}
