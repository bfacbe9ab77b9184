//! `cairn restore`, and the plan and report text and the chosen paths and drift reference
//! that `cairn rewind` and `fork` share with it.

use super::PLAN_LINES;
use crate::args::RestoreArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::count;
use cairn_restore::{ApplyOptions, Context, KeptPath, KeptReason, PlanOptions, Report};
use cairn_store::{RelPath, SnapshotId};
use std::fmt::Write as _;

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
