//! The store's upkeep: `cairn delete`, `prune`, `gc`, `verify` and `recover`.

use super::{LABEL_CELL, PLAN_LINES};
use crate::args::PruneArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::{count, human_bytes, human_time, one_line};
use cairn_store::gc::GcOptions;
use cairn_store::retain::Retention;
use cairn_store::{ErrorKind, SnapshotId, Store};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

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
        "collected {} ({} freed): {} deleted, {} repacked\n",
        count(gc.objects_deleted, "object", "objects"),
        human_bytes(gc.bytes_freed),
        count(gc.packs_deleted as u64, "pack", "packs"),
        gc.packs_repacked
    );
    if gc.plan.young_unreachable > 0 {
        let _ = writeln!(
            out,
            "{} younger than an hour and kept until a later `cairn gc`",
            count(
                gc.plan.young_unreachable,
                "unreachable object is",
                "unreachable objects are"
            )
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
        "deleted {}, {} kept\n",
        count(json.deleted.len() as u64, "snapshot", "snapshots"),
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
            &format!(
                "Delete {}?",
                count(drop.len() as u64, "snapshot", "snapshots")
            ),
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
                "gc would remove {}: delete {}, repack {}, delete {}, {} and {} that are not the store's; {} younger than an hour and kept\n",
                count(objects, "object", "objects"),
                count(plan.delete_packs.len() as u64, "pack", "packs"),
                plan.repack.len(),
                count(plan.delete_large.len() as u64, "large object", "large objects"),
                count(
                    (plan.temp_files.len() + plan.orphan_packs.len()) as u64,
                    "temporary file",
                    "temporary files"
                ),
                count(plan.symlinks.len() as u64, "symlink", "symlinks"),
                count(
                    plan.young_unreachable,
                    "unreachable object is",
                    "unreachable objects are"
                )
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
            "remote gc: {} mark {}; deleted {} and {} ({}); {} marked for a later run; {verb} {} for the grace period and {} for running operations\n",
            count(report.snapshots as u64, "snapshot", "snapshots"),
            count(report.reachable_objects as u64, "object", "objects"),
            count(report.packs_deleted as u64, "pack", "packs"),
            count(report.large_deleted as u64, "large object", "large objects"),
            human_bytes(report.bytes_freed),
            count(report.candidates as u64, "candidate", "candidates"),
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
            "checked {} ({}) and {}\n",
            count(report.copies_checked, "object copy", "object copies"),
            human_bytes(report.bytes_checked),
            count(report.snapshots.len() as u64, "snapshot", "snapshots")
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
                "  snapshot {}: {} missing, {} corrupt{}",
                s.id.short(),
                count(s.missing.len() as u64, "object", "objects"),
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
                "verify found damage in the store at {} ({} cannot be restored in full); copies that failed are quarantined and the next snapshot of the same files heals them",
                store.path().display(),
                count(damaged as u64, "snapshot", "snapshots")
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
                "removed {} a restore had staged (journal {}) that no restore of this workspace \
                 would finish: this tree looks copied while a restore of the original was unfinished \
                 (finish that one where it ran with `cairn recover`); they were Cairn's copies, never \
                 your files: {}{}",
                count(json.stray_staged.len() as u64, "file", "files"),
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
