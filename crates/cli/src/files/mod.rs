//! The commands on snapshots and files: snapshot, list, show, diff, restore, delete, prune, gc,
//! verify and recover.

use crate::args::{PruneArgs, RestoreArgs, SnapshotArgs};
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::{count, human_bytes, human_time, one_line, shown};
use crate::patch;
use cairn_restore::{ApplyOptions, Context, KeptPath, KeptReason, PlanOptions, Report};
use cairn_snapshot::{ChangeKind, EntryInfo};
use cairn_store::gc::GcOptions;
use cairn_store::retain::Retention;
use cairn_store::{
    CaptureSettings, EntryKind, ErrorKind, Manifest, RelPath, SkipReason, SnapshotId, Stats, Store,
    TreeId,
};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

/// How many paths of one kind a plan prints for people (`--json` lists them all).
const PLAN_LINES: usize = 100;

/// A path a snapshot left out, in JSON.
#[derive(Debug, Serialize)]
pub struct SkippedJson {
    /// The path, relative to the root.
    pub path: RelPath,
    /// Why.
    pub reason: SkipReason,
    /// Whether it is a directory.
    pub is_dir: bool,
}

pub(crate) fn skipped_json(list: &[cairn_store::Skipped]) -> Vec<SkippedJson> {
    list.iter()
        .map(|s| SkippedJson {
            path: RelPath(s.path.clone()),
            reason: s.reason,
            is_dir: s.is_dir,
        })
        .collect()
}

/// What `cairn snapshot` prints with `--json`.
#[derive(Debug, Serialize)]
pub struct SnapshotJson {
    /// The snapshot's id.
    pub id: SnapshotId,
    /// Its label.
    pub label: Option<String>,
    /// The workspace it was taken of.
    pub workspace_id: String,
    /// The workspace root.
    #[serde(with = "cairn_store::relpath::os_path")]
    pub root: PathBuf,
    /// What it cost, and what it walked.
    pub stats: SnapshotStatsJson,
    /// What it left out, and why.
    pub skipped: Vec<SkippedJson>,
}

/// A snapshot's stats in `cairn snapshot --json`: the manifest's, and what the walk looked at
/// (`full`, `partial` or `none` of the tree, with a watcher) and why.
#[derive(Debug, Serialize)]
pub struct SnapshotStatsJson {
    /// The manifest's stats.
    #[serde(flatten)]
    pub stats: Stats,
    /// How much of the tree was walked.
    pub walked: cairn_snapshot::Walked,
    /// Why, when a watcher was asked and more than the least was walked.
    pub walk_reason: Option<String>,
    /// Directories listed, every entry looked at.
    pub listed: u64,
    /// Directories of which only the entries the watcher named were looked at.
    pub named: u64,
    /// When the watcher had walked it ahead, once the workspace was quiet, and nothing
    /// changed since: how many milliseconds before it was asked for (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walked_ahead_ms: Option<u64>,
}

pub(crate) fn snapshot(ctx: &Ctx, args: &SnapshotArgs) -> Result<()> {
    let ws = ctx.open_workspace(true)?;
    crate::watch::start_if_asked(ctx, &ws);
    if args.label.as_deref().is_some_and(|l| l.trim().is_empty()) {
        return Err(CliError::usage(
            "snapshot --label needs a label with something in it: an empty label could never \
             be told apart from no label",
        ));
    }
    let mut options = ws.snapshot_options();
    options.label = args.label.clone();
    options
        .capture
        .excludes
        .extend(args.exclude.iter().cloned());
    if let Some(n) = args.max_file_bytes {
        options.capture.max_file_bytes = n;
    }
    if args.no_gitignore {
        options.capture.gitignore = false;
    }
    if args.refuse_hard_links {
        options.capture.refuse_hard_links = true;
    }
    // A snapshot with a progress callback is bound to this process, so a watcher daemon would
    // only be asked what changed; without one, the daemon takes it whole (much faster on a
    // large tree, and then there is nothing to show progress of).
    let bar = if ws.daemon_takes_snapshots() {
        None
    } else {
        ctx.spinner("snapshot: walking")
    };
    let mut report = |p: &cairn_snapshot::Progress| {
        if let Some(bar) = &bar {
            bar.set_message(format!(
                "snapshot: {} files, {} read ({})",
                p.files,
                p.hashed,
                human_bytes(p.hashed_bytes)
            ));
        }
        true
    };
    let progress: Option<cairn_snapshot::ProgressFn<'_>> = if bar.is_some() {
        Some(&mut report)
    } else {
        None
    };
    let outcome = ws.snapshot(
        &options,
        Context {
            progress,
            ..Context::default()
        },
    );
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let snap = outcome?.snapshot;
    let json = SnapshotJson {
        id: snap.id,
        label: snap.manifest.label.clone(),
        workspace_id: ws.id().to_string(),
        root: ws.root().to_path_buf(),
        stats: SnapshotStatsJson {
            stats: snap.stats,
            walked: snap.walk.walked,
            walk_reason: snap.walk.reason.clone(),
            listed: snap.walk.listed,
            named: snap.walk.named,
            walked_ahead_ms: snap.walk.ahead_ms,
        },
        skipped: skipped_json(&snap.skipped),
    };
    ctx.emit(&json, || {
        let s = &json.stats.stats;
        let mut out = format!("snapshot {}", json.id.short());
        if let Some(l) = &json.label {
            let _ = write!(out, " \"{}\"", shown(l));
        }
        let _ = writeln!(out, " of {}", json.root.display());
        let _ = writeln!(
            out,
            "  {} ({}), {} read, {} reused, {} stored, {} ms",
            count(s.files, "file", "files"),
            human_bytes(s.bytes),
            s.hashed,
            s.reused,
            human_bytes(s.stored_bytes),
            s.duration_ms
        );
        if json.stats.walked != cairn_snapshot::Walked::Full || json.stats.walk_reason.is_some() {
            let what = match json.stats.walked {
                cairn_snapshot::Walked::Full => "the whole tree".to_string(),
                cairn_snapshot::Walked::Partial => match json.stats.listed + json.stats.named {
                    1 => "1 directory the watcher named".to_string(),
                    n => format!("{n} directories the watcher named"),
                },
                cairn_snapshot::Walked::None => "nothing (the watcher saw no change)".to_string(),
            };
            let _ = write!(out, "  walked {what}");
            if let Some(ms) = json.stats.walked_ahead_ms {
                let _ = write!(out, ", {ms} ms before it was asked for");
            }
            if let Some(r) = &json.stats.walk_reason {
                let _ = write!(out, ": {r}");
            }
            out.push('\n');
        }
        for k in &json.skipped {
            let _ = writeln!(out, "  skipped {} ({})", k.path, k.reason.name());
        }
        out
    })
}

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

/// The most characters of a label a table shows (`cairn show` and `--json` give it whole).
pub(crate) const LABEL_CELL: usize = 60;

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

/// `w` quoted for a POSIX shell when it needs it.
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// A restore plan for people: what it writes, deletes and keeps.
pub(crate) fn plan_text(report: &Report, root: &std::path::Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "restore {} into {}:",
        report.snapshot_id.short(),
        root.display()
    );
    if !report.paths.is_empty() {
        let _ = writeln!(
            out,
            "  only   {} (everything else is left as it is)",
            report
                .paths
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut section = |verb: &str, paths: Vec<String>| {
        for p in paths.iter().take(PLAN_LINES) {
            let _ = writeln!(out, "  {verb:<8} {p}");
        }
        if paths.len() > PLAN_LINES {
            let _ = writeln!(
                out,
                "  {verb:<8} ... and {} more (--json lists them all)",
                paths.len() - PLAN_LINES
            );
        }
    };
    section(
        "restore",
        report
            .summary
            .restored
            .iter()
            .map(|p| p.to_string())
            .collect(),
    );
    section(
        "delete",
        report
            .summary
            .deleted
            .iter()
            .map(|p| p.to_string())
            .collect(),
    );
    // The default excludes (`.git`, `node_modules`, the store) are always left alone: counted,
    // not listed.
    let (defaults, kept): (Vec<&KeptPath>, Vec<&KeptPath>) = report
        .summary
        .kept
        .iter()
        .partition(|k| k.reason == KeptReason::Excluded);
    section(
        "keep",
        kept.iter()
            .map(|k| format!("{} ({})", k.path, kept_reason(k)))
            .collect(),
    );
    section(
        "drifted",
        report
            .summary
            .drifted
            .iter()
            .map(|p| p.to_string())
            .collect(),
    );
    let _ = writeln!(
        out,
        "  {} to restore, {} to delete, {} {}, {} left alone ({} by the default excludes)",
        report.summary.restored.len(),
        report.summary.deleted.len(),
        report.summary.unchanged,
        unchanged_words(report),
        report.summary.kept.len(),
        defaults.len()
    );
    if report.summary.busy {
        let _ = writeln!(
            out,
            "  BUSY: a command or hold stands on the workspace; the restore would be refused now"
        );
    }
    out
}

/// What the `unchanged` count counts: with chosen paths, the files outside them too.
fn unchanged_words(report: &Report) -> &'static str {
    if report.paths.is_empty() {
        "unchanged"
    } else {
        "unchanged or outside the chosen paths"
    }
}

fn kept_reason(k: &KeptPath) -> String {
    serde_json::to_value(k.reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// What a finished restore says for people; `other_root` names the workspace in the undo
/// command when it is not the one the command runs in.
pub(crate) fn done_text(report: &Report, other_root: Option<&std::path::Path>) -> String {
    let mut out = format!(
        "restored {}, deleted {}, {} {}\n",
        count(report.summary.restored.len() as u64, "path", "paths"),
        report.summary.deleted.len(),
        report.summary.unchanged,
        unchanged_words(report)
    );
    if let Some(s) = report.safety_snapshot_id {
        let dir = other_root
            .map(|r| format!("-C {} ", r.display()))
            .unwrap_or_default();
        let paths: String = report
            .paths
            .iter()
            .map(|p| format!(" {}", shell_word(&p.display())))
            .collect();
        let paths = if paths.is_empty() {
            paths
        } else {
            format!(" --{paths}")
        };
        let _ = writeln!(
            out,
            "safety snapshot {0}: undo with `cairn {dir}restore {0}{paths}`",
            s.short()
        );
    }
    out
}

/// The chosen paths of a restore, as given on the command line, relative to `root`: a
/// relative path is taken from the root, an absolute one must lie under it. `..`, `.` and
/// empty parts are refused naming the path (see [`cairn_restore::normalize_paths`]).
pub(crate) fn chosen_paths(root: &std::path::Path, given: &[String]) -> Result<Vec<RelPath>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::with_capacity(given.len());
    for g in given {
        let p = std::path::Path::new(g);
        let rel = if p.is_absolute() {
            let canon_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
            match p
                .strip_prefix(root)
                .or_else(|_| p.strip_prefix(&canon_root))
            {
                Ok(r) => r.to_path_buf(),
                Err(_) => {
                    return Err(CliError::usage(format!(
                        "the path {g} lies outside the workspace {}; name paths under its root",
                        root.display()
                    )))
                }
            }
        } else {
            p.to_path_buf()
        };
        // `./a` and `a/` are `a`.
        let bytes: Vec<u8> = rel
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .map(|c| c.as_os_str().as_bytes().to_vec())
            .collect::<Vec<_>>()
            .join(&b'/');
        if bytes.is_empty() {
            return Err(CliError::usage(format!(
                "the path {g:?} names the whole workspace; leave the paths out to restore it all"
            )));
        }
        out.push(RelPath(bytes));
    }
    Ok(cairn_restore::normalize_paths(&out)?)
}

/// The snapshot drift is checked against: `--reference`, else the newest snapshot of the
/// workspace taken after `target` (the files being left, safety snapshots included). `None`
/// when there is none: no snapshot says what the files were since, so nothing is drift.
pub(crate) fn drift_reference(
    ws: &cairn_restore::Workspace,
    target: &SnapshotId,
    reference: Option<&str>,
) -> Result<Option<SnapshotId>> {
    if let Some(r) = reference {
        return Ok(Some(ws.store().resolve(r)?));
    }
    let since = ws.store().read_manifest(target)?.created_ms;
    let mut newest: Option<(i64, SnapshotId)> = None;
    for id in ws.store().snapshot_ids()? {
        let m = ws.store().read_manifest(&id)?;
        if m.workspace_id != ws.id() || id == *target || m.created_ms < since {
            continue;
        }
        if newest.as_ref().is_none_or(|(t, _)| m.created_ms >= *t) {
            newest = Some((m.created_ms, id));
        }
    }
    // A safety snapshot stands for the restore that followed it (its target's files).
    Ok(newest.map(|(_, id)| cairn_restore::files_after(ws.store(), &id)))
}

pub(crate) fn restore(ctx: &Ctx, a: &RestoreArgs) -> Result<()> {
    let (dry_run, yes) = (a.dry_run, a.yes);
    ctx.check_confirmable("restore", dry_run, yes)?;
    let ws = ctx.open_workspace(false)?;
    // A container's workspace: refused while a process runs in the container (issue 58).
    crate::container::refuse_if_busy(&ws)?;
    let id = ws.store().resolve(&a.snapshot)?;
    let mut options = PlanOptions {
        paths: chosen_paths(ws.root(), &a.paths)?,
        ..PlanOptions::default()
    };
    if let Some(d) = a.on_drift {
        options.on_drift = d.policy();
        options.reference = drift_reference(&ws, &id, a.reference.as_deref())?;
    }
    if yes && !dry_run {
        return restore_confirmed(ctx, &ws, &id, &options);
    }
    let bar = ctx.spinner("restore: planning");
    let plan = ws.plan(&id, &options, Context::default());
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let plan = plan?;
    let dry = Report::dry_run(&plan);
    if dry_run {
        return ctx.emit(&dry, || {
            plan_text(&dry, ws.root()) + "dry run: nothing was changed\n"
        });
    }
    if !ctx.json {
        print!("{}", plan_text(&dry, ws.root()));
    }
    if plan.is_noop() {
        // Nothing would change: no question to ask.
        let report = ws.apply(&plan, &ApplyOptions::default(), Context::default())?;
        return ctx.emit(&report, || {
            "nothing to do: the files are as the snapshot holds them\n".into()
        });
    }
    ctx.confirm(
        "restore",
        &format!(
            "Restore {} and delete {} in {}?",
            count(dry.summary.restored.len() as u64, "path", "paths"),
            dry.summary.deleted.len(),
            ws.root().display()
        ),
        yes,
    )?;
    // The dry run's lists of every path are not held while the files are written (issue 56).
    drop(dry);
    let bar = ctx.spinner("restore: applying");
    let report = ws.apply(&plan, &ApplyOptions::default(), Context::default());
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    record_restore(ctx, &ws, &report);
    ctx.emit(&report, || done_text(&report, None))
}

/// A restore confirmed beforehand (`--yes`): no question stands between the plan and its
/// apply, so the one walk of the safety snapshot makes the plan that is carried out
/// (`Workspace::restore`), instead of a walk to plan and another for the safety snapshot
/// (issue 56). The plan is printed as it was carried out, then what was done.
fn restore_confirmed(
    ctx: &Ctx,
    ws: &cairn_restore::Workspace,
    id: &cairn_store::SnapshotId,
    options: &PlanOptions,
) -> Result<()> {
    let bar = ctx.spinner("restore: applying");
    let report = ws.restore(id, options, &ApplyOptions::default(), Context::default());
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    if !ctx.json {
        print!("{}", plan_text(&report, ws.root()));
    }
    // A restore that changes something always takes a safety snapshot.
    if report.safety_snapshot_id.is_none() {
        return ctx.emit(&report, || {
            "nothing to do: the files are as the snapshot holds them\n".into()
        });
    }
    record_restore(ctx, ws, &report);
    ctx.emit(&report, || done_text(&report, None))
}

/// Says in the thread database's event log that a restore was applied (`restore_applied`, no
/// thread), for the processes following it (`cairn events --follow`). Only where a thread
/// database is in use (a PostgreSQL URL, or a file that exists): a restore is not the place
/// to create one. The files are restored either way: a failure here is reported, not raised.
fn record_restore(ctx: &Ctx, ws: &cairn_restore::Workspace, report: &cairn_restore::Report) {
    let Ok(db) = ctx.threads_db_with(|| Ok(ws.store().path().to_path_buf())) else {
        return;
    };
    if !(cairn_rewind::is_pg_url(&db.to_string_lossy()) || db.exists()) {
        return;
    }
    let recorded = cairn_rewind::Threads::open(&db, cairn_rewind::ThreadsOptions::default())
        .and_then(|threads| threads.record_restore(ws.id(), ws.root(), report));
    if let Err(e) = recorded {
        eprintln!(
            "cairn: the files are restored, but the restore could not be recorded in the event log of {}: {e}",
            cairn_rewind::redact_url(&db.to_string_lossy())
        );
    }
}

/// What `cairn delete` and `cairn prune` print with `--json`.
#[derive(Debug, Serialize)]
pub struct PruneJson {
    /// Whether this is a dry run (nothing deleted).
    pub dry_run: bool,
    /// The snapshots deleted (or that would be).
    pub deleted: Vec<SnapshotId>,
    /// How many snapshots are kept.
    pub kept: usize,
    /// The collection that followed (absent in a dry run).
    pub gc: Option<cairn_store::gc::GcReport>,
}

fn describe(store: &Store, id: &SnapshotId) -> String {
    match store.read_manifest(id) {
        Ok(m) => format!(
            "{}  {}  {}  {}",
            id.short(),
            human_time(m.created_ms),
            count(m.stats.files, "file", "files"),
            m.label
                .as_deref()
                .map_or("-".into(), |l| one_line(l, LABEL_CELL))
        ),
        Err(_) => format!("{}  (unreadable)", id.short()),
    }
}

fn gc_text(gc: &cairn_store::gc::GcReport) -> String {
    if gc.deferred {
        return "collection deferred: another operation holds the store; run `cairn gc` later\n"
            .into();
    }
    let mut out = format!(
        "collected {} objects ({} freed): {} packs deleted, {} repacked\n",
        gc.objects_deleted,
        human_bytes(gc.bytes_freed),
        gc.packs_deleted,
        gc.packs_repacked
    );
    if gc.plan.young_unreachable > 0 {
        let _ = writeln!(
            out,
            "{} unreachable objects are younger than an hour and kept until a later `cairn gc`",
            gc.plan.young_unreachable
        );
    }
    out
}

/// Prints what a delete or prune did.
fn pruned(ctx: &Ctx, report: cairn_store::retain::PruneReport) -> Result<()> {
    let json = PruneJson {
        dry_run: false,
        deleted: report.deleted,
        kept: report.kept,
        gc: Some(report.gc),
    };
    ctx.emit(&json, || prune_done_text(&json))
}

fn prune_done_text(json: &PruneJson) -> String {
    let mut out = format!(
        "deleted {} snapshots, {} kept\n",
        json.deleted.len(),
        json.kept
    );
    if let Some(gc) = &json.gc {
        out.push_str(&gc_text(gc));
    }
    out
}

pub(crate) fn delete(ctx: &Ctx, name: &str, dry_run: bool, yes: bool) -> Result<()> {
    ctx.check_confirmable("delete", dry_run, yes)?;
    let store = ctx.open_store()?;
    let id = store.resolve(name)?;
    let total = store.snapshot_ids()?.len();
    let plan_text = format!("delete snapshot:\n  {}\n", describe(&store, &id));
    if dry_run {
        let json = PruneJson {
            dry_run: true,
            deleted: vec![id],
            kept: total.saturating_sub(1),
            gc: None,
        };
        return ctx.emit(&json, || plan_text);
    }
    if !ctx.json {
        print!("{plan_text}");
    }
    ctx.confirm("delete", &format!("Delete snapshot {}?", id.short()), yes)?;
    pruned(ctx, store.delete_snapshot(&id, &GcOptions::default())?)
}

pub(crate) fn prune(ctx: &Ctx, args: &PruneArgs) -> Result<()> {
    if args.keep == Some(0) {
        return Err(CliError::usage(
            "prune --keep 0 would delete every snapshot: keep at least 1, or say --all to \
             delete them all",
        ));
    }
    ctx.check_confirmable("prune", args.dry_run, args.yes)?;
    let store = ctx.open_store()?;
    let retention = Retention {
        count: if args.all { Some(0) } else { args.keep },
        max_age: args.max_age,
        max_total_bytes: args.max_bytes,
    };
    let drop = cairn_store::retain::plan(&store, &retention, cairn_store::fsutil::now_ms())?;
    let total = store.snapshot_ids()?.len();
    let mut plan_text = format!("prune: {} of {total} snapshots to delete\n", drop.len());
    for id in drop.iter().take(PLAN_LINES) {
        let _ = writeln!(plan_text, "  delete  {}", describe(&store, id));
    }
    if drop.len() > PLAN_LINES {
        let _ = writeln!(plan_text, "  ... and {} more", drop.len() - PLAN_LINES);
    }
    if args.dry_run {
        let json = PruneJson {
            dry_run: true,
            kept: total - drop.len().min(total),
            deleted: drop,
            gc: None,
        };
        return ctx.emit(&json, || plan_text);
    }
    if !ctx.json {
        print!("{plan_text}");
    }
    if !drop.is_empty() {
        ctx.confirm(
            "prune",
            &format!("Delete {} snapshots?", drop.len()),
            args.yes,
        )?;
    }
    pruned(ctx, store.prune(&retention, &GcOptions::default())?)
}

pub(crate) fn gc(ctx: &Ctx, dry_run: bool) -> Result<()> {
    let store = ctx.open_store()?;
    if store.remote().is_some() {
        return remote_gc(ctx, &store, dry_run);
    }
    let options = GcOptions::default();
    if dry_run {
        let plan = cairn_store::gc::plan(&store, &options)?;
        return ctx.emit(&plan, || {
            let objects: u64 = plan
                .delete_packs
                .iter()
                .chain(&plan.repack)
                .map(|p| p.objects - p.live_objects)
                .sum::<u64>()
                + plan.delete_large.len() as u64;
            format!(
                "gc would remove {} objects: delete {} packs, repack {}, delete {} large objects, {} temporary files and {} symlinks that are not the store's; {} unreachable objects are younger than an hour and kept\n",
                objects,
                plan.delete_packs.len(),
                plan.repack.len(),
                plan.delete_large.len(),
                plan.temp_files.len() + plan.orphan_packs.len(),
                plan.symlinks.len(),
                plan.young_unreachable
            )
        });
    }
    let bar = ctx.spinner("gc: collecting");
    let report = store.gc(&options);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    ctx.emit(&report, || gc_text(&report))
}

/// `cairn gc` of a store that caches a remote: the remote's collector, which marks unreachable
/// objects in one run and deletes them in a later one (`docs/FORMAT.md`).
fn remote_gc(ctx: &Ctx, store: &cairn_store::Store, dry_run: bool) -> Result<()> {
    let options = cairn_store::RemoteGcOptions {
        dry_run,
        ..Default::default()
    };
    let bar = ctx.spinner("gc: collecting the remote");
    let report = store.collect_remote(&options);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    ctx.emit(&report, || {
        let verb = if dry_run { "would keep" } else { "kept" };
        format!(
            "remote gc: {} snapshots mark {} objects; deleted {} packs and {} large objects ({}); {} candidates marked for a later run; {verb} {} for the grace period and {} for running operations\n",
            report.snapshots,
            report.reachable_objects,
            report.packs_deleted,
            report.large_deleted,
            human_bytes(report.bytes_freed),
            report.candidates,
            report.kept_for_grace,
            report.kept_for_leases
        )
    })
}

pub(crate) fn verify(ctx: &Ctx) -> Result<()> {
    let store = ctx.open_store()?;
    let bar = ctx.spinner("verify: re-hashing every object");
    let report = store.verify();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    let (threads_db, threads) = check_threads(ctx)?;
    let json = VerifyJson {
        store: &report,
        threads_db: threads.as_ref().map(|_| threads_db.clone()),
        threads: threads.clone(),
    };
    ctx.emit(&json, || {
        let mut out = format!(
            "checked {} object copies ({}) and {} snapshots\n",
            report.copies_checked,
            human_bytes(report.bytes_checked),
            report.snapshots.len()
        );
        for b in &report.bad_copies {
            let _ = writeln!(
                out,
                "  bad copy of {} in {}: {}",
                b.id.short(),
                b.path.display(),
                b.error
            );
        }
        for b in &report.broken_indexes {
            let _ = writeln!(out, "  broken pack index {}: {}", b.path.display(), b.error);
        }
        for s in report.snapshots.iter().filter(|s| !s.is_ok()) {
            let _ = writeln!(
                out,
                "  snapshot {}: {} objects missing, {} corrupt{}",
                s.id.short(),
                s.missing.len(),
                s.corrupt.len(),
                s.unreadable
                    .as_deref()
                    .map(|u| format!(", unreadable: {u}"))
                    .unwrap_or_default()
            );
        }
        if let Some(t) = &threads {
            let _ = writeln!(out, "checked the thread database {}", threads_db.display());
            for (what, list) in [
                ("integrity", &t.integrity),
                (
                    "entries naming a missing checkpoint",
                    &t.entries_without_checkpoint,
                ),
                ("entries naming a missing parent", &t.entries_without_parent),
                (
                    "threads naming a missing active entry",
                    &t.threads_without_leaf,
                ),
            ] {
                if !list.is_empty() {
                    let _ = writeln!(out, "  {what}: {}", list.join(", "));
                }
            }
        }
        if report.is_ok() && threads.as_ref().is_none_or(|t| t.ok()) {
            out.push_str("all good\n");
        }
        out
    })?;
    if threads.as_ref().is_some_and(|t| !t.ok()) {
        return Err(CliError::new(
            ErrorKind::Corrupt,
            format!(
                "verify found damage in the thread database {}; keep a copy of the file, then \
                 SQLite's `.recover` may save what is readable (the snapshots are checked \
                 apart: {})",
                threads_db.display(),
                if report.is_ok() {
                    "they are whole"
                } else {
                    "some are damaged too"
                }
            ),
        )
        .with_path(threads_db));
    }
    if report.is_ok() {
        Ok(())
    } else {
        let damaged = report.snapshots.iter().filter(|s| !s.is_ok()).count();
        Err(CliError::new(
            ErrorKind::Corrupt,
            format!(
                "verify found damage in the store at {} ({damaged} snapshots cannot be restored in full); copies that failed are quarantined and the next snapshot of the same files heals them",
                store.path().display()
            ),
        )
        .with_path(store.path()))
    }
}

/// What `cairn verify --json` prints: the store's report, and the thread database's check.
#[derive(Debug, Serialize)]
struct VerifyJson<'a> {
    #[serde(flatten)]
    store: &'a cairn_store::verify::VerifyReport,
    /// The thread database checked, when there is one.
    #[serde(with = "cairn_store::relpath::opt_os_path")]
    threads_db: Option<PathBuf>,
    /// What its check found.
    threads: Option<cairn_rewind::DbCheck>,
}

/// Checks the thread database when there is one (a PostgreSQL URL, or a file that exists):
/// its path and what [`cairn_rewind::Threads::check`] found; a file that does not open as a
/// database is reported as damage.
fn check_threads(ctx: &Ctx) -> Result<(PathBuf, Option<cairn_rewind::DbCheck>)> {
    let path = ctx.threads_db()?;
    let url = cairn_rewind::is_pg_url(&path.to_string_lossy());
    if !url && !path.is_file() {
        return Ok((path, None));
    }
    let check = match cairn_rewind::Threads::open(&path, cairn_rewind::ThreadsOptions::default())
        .and_then(|t| t.check())
    {
        Ok(c) => c,
        Err(e) if cairn_store::Classify::kind(&e) == ErrorKind::Corrupt => cairn_rewind::DbCheck {
            integrity: vec![e.to_string()],
            ..Default::default()
        },
        Err(e) => return Err(e.into()),
    };
    Ok((path, Some(check)))
}

/// What `cairn recover --json` prints.
#[derive(Debug, Serialize)]
pub struct RecoverJson {
    /// What each pending journal came to.
    pub recovered: Vec<cairn_restore::Recovery>,
    /// Files restores had staged that no restore of this workspace would finish (a tree
    /// copied while a restore of the original was pending), removed.
    pub stray_staged: Vec<cairn_restore::StrayStaged>,
    /// What the thread database's recovery did with rewinds a crash interrupted (completed
    /// once their files are, blocked while their files wait, failed), when there is one.
    pub rewinds: Option<cairn_rewind::Recovery>,
}

pub(crate) fn recover(ctx: &Ctx, give_up: bool) -> Result<()> {
    let ws = ctx.open_workspace_with(false, false)?;
    let recovered = if give_up {
        ws.give_up()?
    } else {
        ws.recover()?
    };
    let obstructed: Vec<&cairn_restore::Recovery> = recovered
        .iter()
        .filter(|r| !r.completed && !r.abandoned)
        .collect();
    let stray_staged = ws.remove_stray_staged()?;
    // Rewinds whose files waited for this recovery finish now, conversation included.
    let db = ctx.threads_db()?;
    let ws = std::sync::Arc::new(ws);
    let rewinds = if cairn_rewind::is_pg_url(&db.to_string_lossy()) || db.is_file() {
        let threads = cairn_rewind::Threads::open(
            &db,
            cairn_rewind::ThreadsOptions {
                recover: false,
                ..Default::default()
            },
        )?;
        let done = threads.recover(&[ws.clone() as std::sync::Arc<dyn cairn_rewind::Files>])?;
        // The agent's half of each, for an agent that keeps one history (issue 54).
        done.completed.iter().for_each(crate::agents::settle);
        Some(done)
    } else {
        None
    };
    let json = RecoverJson {
        recovered: recovered.clone(),
        stray_staged,
        rewinds,
    };
    ctx.emit(&json, || {
        let mut out = String::new();
        if json.recovered.is_empty() && json.stray_staged.is_empty() {
            out.push_str("nothing to recover: no restore was interrupted\n");
        }
        if !json.stray_staged.is_empty() {
            let mut journals: Vec<&str> =
                json.stray_staged.iter().map(|s| s.journal.as_str()).collect();
            journals.sort_unstable();
            journals.dedup();
            let sample: Vec<String> = json
                .stray_staged
                .iter()
                .take(5)
                .map(|s| s.path.to_string())
                .collect();
            let _ = writeln!(
                out,
                "removed {} files a restore had staged (journal {}) that no restore of this workspace \
                 would finish: this tree looks copied while a restore of the original was unfinished \
                 (finish that one where it ran with `cairn recover`); they were Cairn's copies, never \
                 your files: {}{}",
                json.stray_staged.len(),
                journals.join(", "),
                sample.join(", "),
                if json.stray_staged.len() > sample.len() { ", ..." } else { "" }
            );
        }
        if let Some(rw) = &json.rewinds {
            for c in &rw.completed {
                if let Some(id) = &c.rewind_id {
                    let _ = writeln!(out, "completed rewind {id} (files and conversation)");
                }
            }
            for b in &rw.blocked {
                let _ = writeln!(out, "rewind {} waits: {}", b.rewind_id, b.message);
            }
            for f in &rw.failed {
                let _ = writeln!(
                    out,
                    "rewind {f} ended as failed: its files were not restored, or their restore was given up; the conversation is as it was"
                );
            }
        }
        for r in &json.recovered {
            if r.completed {
                let _ = writeln!(
                    out,
                    "finished the interrupted restore of {} (journal {})",
                    r.target.short(),
                    r.journal
                );
            } else {
                let names: Vec<String> = r.obstructed.iter().map(|p| p.to_string()).collect();
                let safety = r
                    .safety
                    .map(|s| format!("; `cairn restore {}` puts back the files as they were before it", s.short()))
                    .unwrap_or_default();
                if r.abandoned {
                    let _ = writeln!(
                        out,
                        "gave up the restore of {} (journal {}), leaving as they are: {}{safety}",
                        r.target.short(),
                        r.journal,
                        names.join(", ")
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "could not finish the restore of {} (journal {}): in the way (later edits, or paths it may not change): {}",
                        r.target.short(),
                        r.journal,
                        names.join(", ")
                    );
                }
            }
        }
        out
    })?;
    match obstructed.first() {
        None => Ok(()),
        Some(r) => {
            let first = r.obstructed.first().map(|p| ws.root().join(p.as_path()));
            let mut e = CliError::new(
                ErrorKind::Conflict,
                format!(
                    "{} interrupted restores cannot finish: later edits, or paths they may not change, stand in their way; move those files aside (or make them changeable) and run `cairn recover` again, or end those restores as they stand with `cairn recover --give-up`",
                    obstructed.len()
                ),
            );
            if let Some(p) = first {
                e = e.with_path(p);
            }
            Err(e)
        }
    }
}
