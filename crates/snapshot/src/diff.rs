//! Differences between two snapshots, or a snapshot and the live workspace, computed from
//! trees: a subtree whose id did not change is not visited.

use crate::error::Result;
use crate::{scan, Context, Options};
use cairn_store::relpath::join;
use cairn_store::{EntryKind, ObjectId, SnapshotId, Store, Tree, TreeEntry, TreeId};
use serde::Serialize;
use std::path::Path;

/// What changed at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// Present only in the newer side.
    Added,
    /// Content (or link target) differs.
    Modified,
    /// Present only in the older side.
    Deleted,
    /// Same content, different mode.
    ModeChanged,
    /// A file became a symlink or a directory, or the other way round.
    TypeChanged,
}

/// One side of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EntryInfo {
    /// What it is.
    pub kind: EntryKind,
    /// Its full mode.
    pub mode: u32,
    /// Its size.
    pub size: u64,
    /// Its blob or tree.
    pub id: ObjectId,
}

impl From<&TreeEntry> for EntryInfo {
    fn from(e: &TreeEntry) -> Self {
        EntryInfo {
            kind: e.kind,
            mode: e.mode,
            size: e.size,
            id: e.id,
        }
    }
}

/// One changed path. Directories are described by the files and links under them; a path
/// whose type changed is listed once as `type-changed`, then what a new or old directory there
/// holds as added or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The path relative to the root, raw bytes.
    pub path: Vec<u8>,
    /// What changed.
    pub kind: ChangeKind,
    /// The older side.
    pub old: Option<EntryInfo>,
    /// The newer side.
    pub new: Option<EntryInfo>,
}

/// Differences from tree `a` to tree `b`; `tree` reads a tree by id.
pub fn diff_trees(
    tree: &dyn Fn(&TreeId) -> Result<Tree>,
    a: TreeId,
    b: TreeId,
) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    diff_dir(tree, b"", Some(a), Some(b), &mut out)?;
    Ok(out)
}

fn list_all(
    tree: &dyn Fn(&TreeId) -> Result<Tree>,
    prefix: &[u8],
    id: TreeId,
    added: bool,
    out: &mut Vec<Change>,
) -> Result<()> {
    diff_dir(
        tree,
        prefix,
        if added { None } else { Some(id) },
        if added { Some(id) } else { None },
        out,
    )
}

fn diff_dir(
    tree: &dyn Fn(&TreeId) -> Result<Tree>,
    prefix: &[u8],
    a: Option<TreeId>,
    b: Option<TreeId>,
    out: &mut Vec<Change>,
) -> Result<()> {
    if a == b {
        return Ok(());
    }
    let ta = match a {
        Some(id) => tree(&id)?,
        None => Tree::default(),
    };
    let tb = match b {
        Some(id) => tree(&id)?,
        None => Tree::default(),
    };
    let (ea, eb) = (ta.entries(), tb.entries());
    let (mut i, mut j) = (0, 0);
    while i < ea.len() || j < eb.len() {
        let ord = match (ea.get(i), eb.get(j)) {
            (Some(x), Some(y)) => x.name.cmp(&y.name),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                let x = &ea[i];
                removed_or_added(tree, prefix, x, false, out)?;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                let y = &eb[j];
                removed_or_added(tree, prefix, y, true, out)?;
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (x, y) = (&ea[i], &eb[j]);
                let path = join(prefix, &x.name);
                if x.kind == EntryKind::Dir && y.kind == EntryKind::Dir {
                    diff_dir(tree, &path, Some(TreeId(x.id)), Some(TreeId(y.id)), out)?;
                } else if x.kind != y.kind {
                    out.push(Change {
                        path: path.clone(),
                        kind: ChangeKind::TypeChanged,
                        old: Some(x.into()),
                        new: Some(y.into()),
                    });
                    if x.kind == EntryKind::Dir {
                        list_all(tree, &path, TreeId(x.id), false, out)?;
                    }
                    if y.kind == EntryKind::Dir {
                        list_all(tree, &path, TreeId(y.id), true, out)?;
                    }
                } else if x.id != y.id {
                    out.push(Change {
                        path,
                        kind: ChangeKind::Modified,
                        old: Some(x.into()),
                        new: Some(y.into()),
                    });
                } else if x.mode != y.mode {
                    out.push(Change {
                        path,
                        kind: ChangeKind::ModeChanged,
                        old: Some(x.into()),
                        new: Some(y.into()),
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
    Ok(())
}

fn removed_or_added(
    tree: &dyn Fn(&TreeId) -> Result<Tree>,
    prefix: &[u8],
    e: &TreeEntry,
    added: bool,
    out: &mut Vec<Change>,
) -> Result<()> {
    let path = join(prefix, &e.name);
    if e.kind == EntryKind::Dir {
        return list_all(tree, &path, TreeId(e.id), added, out);
    }
    out.push(Change {
        path,
        kind: if added {
            ChangeKind::Added
        } else {
            ChangeKind::Deleted
        },
        old: (!added).then(|| e.into()),
        new: added.then(|| e.into()),
    });
    Ok(())
}

/// Differences from snapshot `a` to snapshot `b`.
pub fn diff_snapshots(store: &Store, a: &SnapshotId, b: &SnapshotId) -> Result<Vec<Change>> {
    let ma = store.read_manifest(a)?;
    let mb = store.read_manifest(b)?;
    diff_trees(&|id| Ok(store.read_tree(id)?), ma.root, mb.root)
}

/// Differences from snapshot `a` to the live workspace at `root`, walked with the snapshot's
/// own capture settings and the workspace's stat cache (only changed files are read).
pub fn diff_workspace(
    store: &Store,
    root: &Path,
    workspace_id: &str,
    a: &SnapshotId,
) -> Result<Vec<Change>> {
    let ma = store.read_manifest(a)?;
    let live = scan(
        store,
        root,
        workspace_id,
        &Options {
            capture: ma.capture.clone(),
            ..Options::default()
        },
        Context::default(),
    )?;
    diff_trees(
        &|id| match live.trees.get(id) {
            Some(t) => Ok(t.clone()),
            None => Ok(store.read_tree(id)?),
        },
        ma.root,
        live.root,
    )
}
