//! `cairn list`, `show` and `diff`: what the snapshots hold and how they differ.

use super::{skipped_json, SkippedJson, LABEL_CELL};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::parse::{count, human_bytes, human_time, one_line, shown};
use crate::patch;
use cairn_snapshot::{ChangeKind, EntryInfo};
use cairn_store::{
    CaptureSettings, EntryKind, Manifest, RelPath, SnapshotId, Stats, Store, TreeId,
};
use serde::Serialize;
use std::fmt::Write as _;

/// One snapshot in `cairn list --json`.
#[derive(Debug, Serialize)]
pub struct SnapshotSummary {
    /// Its id.
    pub id: SnapshotId,
    /// Its label.
    pub label: Option<String>,
    /// When it was taken (ms since the Unix epoch).
    pub created_ms: i64,
    /// The workspace it was taken of.
    pub workspace_id: String,
    /// That workspace's root.
    pub workspace_root: String,
    /// Whether retention never drops it.
    pub protected: bool,
    /// What it holds and cost.
    pub stats: Stats,
}

impl SnapshotSummary {
    fn new(id: SnapshotId, m: &Manifest) -> Self {
        SnapshotSummary {
            id,
            label: m.label.clone(),
            created_ms: m.created_ms,
            workspace_id: m.workspace_id.clone(),
            workspace_root: String::from_utf8_lossy(&m.workspace_root).into_owned(),
            protected: m.protected,
            stats: m.stats,
        }
    }
}

/// A snapshot whose manifest could not be read.
#[derive(Debug, Serialize)]
pub struct UnreadableJson {
    /// Its id.
    pub id: SnapshotId,
    /// Why it could not be read.
    pub error: String,
}

/// What `cairn list --json` prints.
#[derive(Debug, Serialize)]
pub struct ListJson {
    /// The snapshots, oldest first.
    pub snapshots: Vec<SnapshotSummary>,
    /// Manifests that could not be read.
    pub unreadable: Vec<UnreadableJson>,
}

pub(crate) fn list(ctx: &Ctx) -> Result<()> {
    let store = ctx.open_store()?;
    let (ok, bad) = store.list_snapshots()?;
    let json = ListJson {
        snapshots: ok
            .iter()
            .map(|e| SnapshotSummary::new(e.id, &e.manifest))
            .collect(),
        unreadable: bad
            .into_iter()
            .map(|(id, e)| UnreadableJson {
                id,
                error: e.to_string(),
            })
            .collect(),
    };
    ctx.emit(&json, || {
        let mut out = String::new();
        if json.snapshots.is_empty() {
            out.push_str("no snapshots yet; take one with `cairn snapshot`\n");
        } else {
            let _ = writeln!(
                out,
                "{:<12}  {:<19}  {:>7}  {:>10}  LABEL",
                "ID", "CREATED (UTC)", "FILES", "SIZE"
            );
        }
        for s in &json.snapshots {
            let _ = writeln!(
                out,
                "{:<12}  {:<19}  {:>7}  {:>10}  {}{}",
                s.id.short(),
                human_time(s.created_ms),
                s.stats.files,
                human_bytes(s.stats.bytes),
                s.label
                    .as_deref()
                    .map_or("-".into(), |l| one_line(l, LABEL_CELL)),
                if s.protected { " (protected)" } else { "" }
            );
        }
        for u in &json.unreadable {
            let _ = writeln!(out, "{:<12}  unreadable: {}", u.id.short(), u.error);
        }
        out
    })
}

/// One entry of a snapshot in `cairn show --json`.
#[derive(Debug, Serialize)]
pub struct FileJson {
    /// The path, relative to the root.
    pub path: RelPath,
    /// File, symlink or directory.
    pub kind: EntryKind,
    /// Its full mode.
    pub mode: u32,
    /// Its size (a directory: the bytes of the files below it).
    pub size: u64,
    /// Its blob or tree.
    pub id: cairn_store::ObjectId,
}

/// What `cairn show --json` prints.
#[derive(Debug, Serialize)]
pub struct ShowJson {
    /// The manifest's summary.
    #[serde(flatten)]
    pub summary: SnapshotSummary,
    /// Its root tree.
    pub root: TreeId,
    /// The caller's metadata.
    pub metadata: serde_json::Value,
    /// How it was taken.
    pub capture: CaptureSettings,
    /// What it left out.
    pub skipped: Vec<SkippedJson>,
    /// Every entry, depth first, sorted by name.
    pub files: Vec<FileJson>,
}

fn walk_tree(store: &Store, root: TreeId, prefix: &[u8], out: &mut Vec<FileJson>) -> Result<()> {
    let tree = store.read_tree(&root)?;
    for e in tree.entries() {
        let mut path = prefix.to_vec();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(&e.name);
        out.push(FileJson {
            path: RelPath(path.clone()),
            kind: e.kind,
            mode: e.mode,
            size: e.size,
            id: e.id,
        });
        if e.kind == EntryKind::Dir {
            walk_tree(store, TreeId(e.id), &path, out)?;
        }
    }
    Ok(())
}

pub(crate) fn show(ctx: &Ctx, name: &str) -> Result<()> {
    let store = ctx.open_store()?;
    let id = store.resolve(name)?;
    let m = store.read_manifest(&id)?;
    let mut files = Vec::new();
    walk_tree(&store, m.root, b"", &mut files)?;
    let json = ShowJson {
        summary: SnapshotSummary::new(id, &m),
        root: m.root,
        metadata: serde_json::from_str(&m.metadata).unwrap_or(serde_json::Value::Null),
        capture: m.capture.clone(),
        skipped: skipped_json(&m.skipped),
        files,
    };
    ctx.emit(&json, || {
        let s = &json.summary;
        let st = &s.stats;
        let mut out = String::new();
        let _ = writeln!(out, "snapshot  {}", s.id);
        let _ = writeln!(
            out,
            "label     {}",
            shown(s.label.as_deref().unwrap_or("-"))
        );
        let _ = writeln!(out, "created   {} UTC", human_time(s.created_ms));
        let _ = writeln!(out, "workspace {} at {}", s.workspace_id, s.workspace_root);
        let _ = writeln!(
            out,
            "holds     {}, {}, {}, {}",
            count(st.files, "file", "files"),
            count(st.dirs, "directory", "directories"),
            count(st.symlinks, "symlink", "symlinks"),
            human_bytes(st.bytes)
        );
        let _ = writeln!(
            out,
            "cost      {} read, {} reused, {} stored, {} ms",
            st.hashed,
            st.reused,
            human_bytes(st.stored_bytes),
            st.duration_ms
        );
        let c = &json.capture;
        let _ = writeln!(
            out,
            "capture   excludes [{}], files up to {}, .gitignore {}{}",
            c.excludes.join(", "),
            human_bytes(c.max_file_bytes),
            if c.gitignore { "honoured" } else { "ignored" },
            if s.protected { ", protected" } else { "" }
        );
        if json.metadata.as_object().is_some_and(|o| !o.is_empty()) {
            let _ = writeln!(out, "metadata  {}", shown(&json.metadata.to_string()));
        }
        for k in &json.skipped {
            let _ = writeln!(out, "skipped   {} ({})", k.path, k.reason.name());
        }
        out.push('\n');
        for f in &json.files {
            if f.kind == EntryKind::Dir {
                let _ = writeln!(out, "{:06o}  {:>10}  {}/", f.mode, "", f.path);
            } else {
                let _ = writeln!(
                    out,
                    "{:06o}  {:>10}  {}",
                    f.mode,
                    human_bytes(f.size),
                    f.path
                );
            }
        }
        out
    })
}

/// One change in `cairn diff --json`.
#[derive(Debug, Serialize)]
pub struct ChangeJson {
    /// The path, relative to the root.
    pub path: RelPath,
    /// What changed.
    pub kind: ChangeKind,
    /// The older side.
    pub old: Option<EntryInfo>,
    /// The newer side.
    pub new: Option<EntryInfo>,
    /// With `--patch`: the unified diff (absent for binary files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// With `--patch`: whether the contents are binary (no patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<bool>,
    /// With `--attribute`: the checkpoint intervals it changed in, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Vec<cairn_rewind::Attribution>>,
}

/// What `cairn diff --json` prints.
#[derive(Debug, Serialize)]
pub struct DiffJson {
    /// The older snapshot.
    pub from: SnapshotId,
    /// The newer snapshot; `null` for the files as they are now.
    pub to: Option<SnapshotId>,
    /// The changes, sorted by path.
    pub changes: Vec<ChangeJson>,
}

fn change_letter(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "A",
        ChangeKind::Modified => "M",
        ChangeKind::Deleted => "D",
        ChangeKind::ModeChanged => "m",
        ChangeKind::TypeChanged => "T",
    }
}

pub(crate) fn diff(
    ctx: &Ctx,
    a: &str,
    b: Option<&str>,
    with_patch: bool,
    with_attribution: bool,
) -> Result<()> {
    let mut opened = None;
    let (store, root, changes, to) = match b {
        Some(b) => {
            let store = ctx.open_store()?;
            let ia = store.resolve(a)?;
            let ib = store.resolve(b)?;
            let changes = cairn_snapshot::diff_snapshots(&store, &ia, &ib)?;
            (store, None, changes, (ia, Some(ib)))
        }
        None => {
            let ws = ctx.open_workspace(false)?;
            let ia = ws.store().resolve(a)?;
            let bar = ctx.spinner("diff: walking the workspace");
            let changes = cairn_snapshot::diff_workspace(ws.store(), ws.root(), ws.id(), &ia);
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let store = ws.store().clone();
            let root = ws.root().to_path_buf();
            opened = Some(ws);
            (store, Some(root), changes?, (ia, None))
        }
    };
    let attributions = if with_attribution {
        cairn_rewind::attribute_changes(&store, opened.as_ref(), to.0, to.1, &changes)?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None; changes.len()]
    };
    let mut out = Vec::with_capacity(changes.len());
    for (c, attribution) in changes.into_iter().zip(attributions) {
        let (patch, binary) = if with_patch {
            match patch::patch_of(&store, root.as_deref(), &c)? {
                patch::Patch::Text(t) => (Some(t), Some(false)),
                patch::Patch::Binary => (None, Some(true)),
                patch::Patch::None => (None, Some(false)),
            }
        } else {
            (None, None)
        };
        out.push(ChangeJson {
            path: RelPath(c.path),
            kind: c.kind,
            old: c.old,
            new: c.new,
            patch,
            binary,
            attribution,
        });
    }
    let json = DiffJson {
        from: to.0,
        to: to.1,
        changes: out,
    };
    ctx.emit(&json, || {
        let mut out = String::new();
        if json.changes.is_empty() {
            let _ = writeln!(
                out,
                "no changes from {} to {}",
                json.from.short(),
                json.to
                    .map(|t| t.short())
                    .unwrap_or_else(|| "the files now".into())
            );
        }
        for c in &json.changes {
            let mut line = format!("{}  {}", change_letter(c.kind), c.path);
            if c.kind == ChangeKind::ModeChanged {
                if let (Some(o), Some(n)) = (&c.old, &c.new) {
                    let _ = write!(line, " ({:o} -> {:o})", o.mode & 0o7777, n.mode & 0o7777);
                }
            }
            let _ = writeln!(out, "{line}");
            for w in c.attribution.iter().flatten() {
                let _ = writeln!(
                    out,
                    "     changed after {}",
                    one_line(&w.to_string(), LABEL_CELL)
                );
            }
            if with_patch {
                if c.binary == Some(true) {
                    let _ = writeln!(out, "Binary files a/{0} and b/{0} differ", c.path);
                } else if let Some(p) = &c.patch {
                    out.push_str(p);
                    if !p.ends_with('\n') {
                        out.push('\n');
                    }
                }
            }
        }
        out
    })
}
