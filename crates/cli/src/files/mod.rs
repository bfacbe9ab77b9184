//! The commands on snapshots and files: `snapshot` here; `list`, `show` and `diff` in
//! `inspect`; `restore` (and the plan and report text the rewind and fork commands share) in
//! `restore`; `delete`, `prune`, `gc`, `verify` and `recover` in `upkeep`.

mod inspect;
mod restore;
mod upkeep;

pub(crate) use inspect::{diff, list, show};
pub(crate) use restore::{chosen_paths, done_text, drift_reference, plan_text, restore};
pub(crate) use upkeep::{delete, gc, prune, recover, verify};

use crate::args::SnapshotArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::{count, human_bytes, shown};
use cairn_restore::Context;
use cairn_store::{RelPath, SkipReason, SnapshotId, Stats};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

/// How many paths of one kind a plan prints for people (`--json` lists them all).
pub(super) const PLAN_LINES: usize = 100;

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
                "snapshot: {}, {} read ({})",
                count(p.files, "file", "files"),
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

/// The most characters of a label a table shows (`cairn show` and `--json` give it whole).
pub(crate) const LABEL_CELL: usize = 60;
