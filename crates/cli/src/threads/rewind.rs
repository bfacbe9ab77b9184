//! `cairn rewind`: to an entry or a checkpoint, its plan and report for people, and what it
//! announces.

use super::{log_text, open, pick_unique, resolve_entry, thread_named, EntryJson, LogJson};
use crate::args::RewindArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::files::{done_text, plan_text};
use crate::parse::{count, human_time, one_line};
use cairn_rewind::{
    Checkpoint, CheckpointId, EntryId, Files, RewindOptions, Thread, ThreadId, Threads,
};
use cairn_store::ErrorKind;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// The restore part of a files report, for people.
/// `root` is the workspace restored (a fork's report names the checkpoint's own).
pub(super) fn files_plan_text(
    files: &cairn_rewind::FilesReport,
    dry_run: bool,
    root: &Path,
    other_root: bool,
) -> String {
    let mut out = format!(
        "  files: the checkpoint {} (snapshot {}, {}) into {}\n",
        files.checkpoint_id,
        files.snapshot_id.short(),
        if files.exact {
            "the files exactly at that point"
        } else {
            "the files before the turn that holds the point"
        },
        root.display()
    );
    match serde_json::from_value::<cairn_restore::Report>(files.restore.clone()) {
        Ok(report) => {
            let text = if dry_run {
                plan_text(&report, root)
            } else {
                done_text(&report, other_root.then_some(root))
            };
            for line in text.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
        Err(_) => {
            let _ = writeln!(out, "    {}", files.restore);
        }
    }
    out
}

fn rewind_text(r: &cairn_rewind::RewindReport) -> String {
    let to = r
        .to_entry_id
        .as_ref()
        .map(|e| e.as_str())
        .unwrap_or("the start");
    let mut out = if r.dry_run {
        format!("plan: rewind thread {} to {to}\n", r.thread_id)
    } else {
        format!("rewound thread {} to {to}:\n", r.thread_id)
    };
    let c = &r.conversation;
    if !c.cut.is_empty() || c.restored.is_empty() {
        let _ = writeln!(
            out,
            "  conversation: {} {} off the active branch (kept on a branch of their own)",
            count(c.cut.len() as u64, "entry", "entries"),
            if r.dry_run { "would be taken" } else { "taken" }
        );
    }
    if !c.restored.is_empty() {
        // A rewind to a "Before rewind" checkpoint brings back what the rewind cut (issue 53).
        let _ = writeln!(
            out,
            "  conversation: {} {} back on the active branch",
            count(c.restored.len() as u64, "entry", "entries"),
            if r.dry_run { "would be put" } else { "put" }
        );
    }
    match &r.files {
        Some(f) => {
            out.push_str(&files_plan_text(f, r.dry_run, &f.root, false));
            if let Some(cp) = &f.before_rewind_checkpoint_id {
                let _ = writeln!(
                    out,
                    "  before rewind: checkpoint {cp} keeps the files and the conversation as they were: \
                     `cairn rewind {} {cp} --files` brings them back",
                    r.thread_id
                );
            }
        }
        None => out.push_str("  files: left as they are (add --files to restore them)\n"),
    }
    if !r.memory.staled.is_empty() {
        let _ = writeln!(
            out,
            "  memory: {} stale",
            count(r.memory.staled.len() as u64, "item", "items")
        );
    }
    let runs = &r.runs;
    let dropped = runs.paused.len() + runs.durable.len() + runs.interrupted.len();
    if dropped > 0 {
        let _ = writeln!(
            out,
            "  runs: {} interrupted, {} paused and {} durable dropped",
            runs.interrupted.len(),
            runs.paused.len(),
            runs.durable.len()
        );
    }
    out
}

pub(super) fn file_counts(files: Option<&cairn_rewind::FilesReport>) -> (usize, usize) {
    let count = |key: &str| {
        files
            .and_then(|f| f.restore.get(key))
            .and_then(|v| v.as_array())
            .map(Vec::len)
            .unwrap_or(0)
    };
    (count("restored"), count("deleted"))
}

/// What `cairn rewind THREAD` (no entry) prints with `--json`.
#[derive(Debug, Serialize)]
pub struct ChooseJson {
    /// The thread.
    pub thread: Thread,
    /// Its active branch, first entry first (`checkpoint` set on those with files).
    pub entries: Vec<EntryJson>,
    /// The checkpoints of its lineage taken by hand, by a hook or before a rewind: those no
    /// entry names, oldest first.
    pub checkpoints: Vec<Checkpoint>,
}

/// What a rewind goes to: an entry, or a checkpoint.
pub(crate) enum Point {
    /// An entry of the active branch.
    Entry(EntryId),
    /// A checkpoint of the thread's lineage.
    Checkpoint(CheckpointId),
}

impl Point {
    /// The entry or checkpoint `name` (`cp_…` names a checkpoint) of `thread`.
    pub(crate) fn resolve(threads: &Threads, thread: &ThreadId, name: &str) -> Result<Point> {
        Ok(if name.starts_with(CheckpointId::PREFIX) {
            Point::Checkpoint(resolve_checkpoint(threads, thread, name)?)
        } else {
            Point::Entry(resolve_entry(threads, thread, name)?)
        })
    }

    /// The library's rewind of `thread` to this point.
    pub(crate) fn rewind(
        &self,
        threads: &Threads,
        thread: &ThreadId,
        options: &RewindOptions,
    ) -> std::result::Result<cairn_rewind::RewindReport, cairn_rewind::Error> {
        match self {
            Point::Entry(e) => threads.rewind(thread, e, options),
            Point::Checkpoint(c) => threads.rewind_to_checkpoint(thread, c, options),
        }
    }
}

/// The rewind of `thread` made with request key `key`, if there is one (issue 59).
pub(crate) fn keyed_rewind(
    threads: &Threads,
    thread: &ThreadId,
    key: &str,
) -> Result<Option<cairn_rewind::RewindRecord>> {
    Ok(threads
        .rewinds(thread)?
        .into_iter()
        .find(|r| r.key.as_deref() == Some(key)))
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Entry(e) => write!(f, "{e}"),
            Point::Checkpoint(c) => write!(f, "checkpoint {c}"),
        }
    }
}

/// Resolves a checkpoint name (`cp_…`: a full id or a unique prefix) among the checkpoints
/// of the thread's lineage.
fn resolve_checkpoint(threads: &Threads, thread: &ThreadId, name: &str) -> Result<CheckpointId> {
    let ids: Vec<CheckpointId> = threads
        .list_checkpoints(thread)?
        .into_iter()
        .map(|c| c.id)
        .collect();
    pick_unique(
        &ids,
        name,
        CheckpointId::PREFIX,
        &format!("checkpoint of thread {thread}"),
        &format!("`cairn rewind {thread}` lists its checkpoints"),
    )
}

/// `cairn rewind THREAD`: the active branch with `[files]` marks, and the checkpoints no entry
/// names (by hand, by a hook, before a rewind), to choose a point from.
fn choose(ctx: &Ctx, args: &RewindArgs) -> Result<()> {
    if args.files || args.no_memory || args.dry_run || args.yes || args.force {
        return Err(CliError::usage(format!(
            "name the entry or checkpoint to rewind to: `cairn rewind {} ENTRY ...`; \
             `cairn rewind {}` alone lists them",
            args.thread, args.thread
        )));
    }
    let o = open(ctx, false)?;
    let thread = thread_named(&o.threads, &args.thread)?;
    let entries: Vec<EntryJson> = o
        .threads
        .active_branch(&thread.id)?
        .into_iter()
        .map(EntryJson::from)
        .collect();
    let named: std::collections::HashSet<CheckpointId> = o
        .threads
        .entries(&thread.id, true)?
        .into_iter()
        .filter_map(|e| e.checkpoint.map(|c| c.checkpoint_id))
        .collect();
    let checkpoints: Vec<Checkpoint> = o
        .threads
        .list_checkpoints(&thread.id)?
        .into_iter()
        .filter(|c| !named.contains(&c.id))
        .collect();
    let json = ChooseJson {
        thread,
        entries,
        checkpoints,
    };
    ctx.emit(&json, || {
        let log = LogJson {
            thread: json.thread.clone(),
            entries: json.entries.clone(),
        };
        let mut out = log_text(&log, false);
        if !json.checkpoints.is_empty() {
            out.push_str("checkpoints (by hand, by a hook, before a rewind):\n");
            for c in &json.checkpoints {
                let _ = writeln!(
                    out,
                    "  {}  {:<13}  at {}  {}",
                    c.id,
                    // Whole (up to a table's cell): tool calls' ids differ at their end
                    // (issue 53: two read `toolu_01Audi…` when cut to 12 characters).
                    one_line(c.label.as_deref().unwrap_or(""), crate::files::LABEL_CELL),
                    c.entry_id
                        .as_ref()
                        .map(|e| e.as_str())
                        .unwrap_or("the start"),
                    human_time(c.created_ms)
                );
            }
        }
        let _ = writeln!(
            out,
            "rewind with `cairn rewind {} ENTRY|CHECKPOINT [--files] --dry-run`",
            json.thread.id
        );
        out
    })
}

pub(crate) fn rewind(ctx: &Ctx, args: &RewindArgs) -> Result<()> {
    let Some(name) = &args.entry else {
        return choose(ctx, args);
    };
    let is_checkpoint = name.starts_with(CheckpointId::PREFIX);
    // A checkpoint with --no-memory restores its files: that is what it is for.
    let files = args.files || (is_checkpoint && args.no_memory);
    if files {
        ctx.check_confirmable("rewind --files", args.dry_run, args.yes)?;
    }
    let o = open(ctx, false)?;
    let found = thread_named(&o.threads, &args.thread)?;
    let thread = found.id.clone();
    // A key whose rewind completed: that rewind again, planned and run no second time (issue 59).
    let repeated = match &args.key {
        Some(key) => {
            keyed_rewind(&o.threads, &thread, key)?.is_some_and(|r| r.state == "completed")
        }
        None => false,
    };
    let point = if is_checkpoint {
        Point::Checkpoint(resolve_checkpoint(&o.threads, &thread, name)?)
    } else {
        let entry = resolve_entry(&o.threads, &thread, name)?;
        if !repeated && !o.threads.entry(&entry)?.on_active_branch {
            return Err(CliError::new(
                ErrorKind::Validation,
                format!(
                    "entry {entry} is not on the active branch of thread {thread}: rewind to an entry \
                     `cairn thread log {thread}` lists, to a checkpoint `cairn rewind {thread}` lists, or fork \
                     from it with `cairn fork {thread} {entry}`"
                ),
            ));
        }
        Point::Entry(entry)
    };
    let mut options = RewindOptions {
        files: Some(files),
        memory: !args.no_memory,
        workspace: Some(o.ws.clone() as Arc<dyn Files>),
        dry_run: true,
        force: args.force,
        key: args.key.clone(),
        ..RewindOptions::default()
    };
    if !files && (args.on_drift.is_some() || !args.paths.is_empty()) {
        return Err(CliError::usage(
            "--on-drift and paths choose how files are restored: give them with --files",
        ));
    }
    if files {
        // A container's workspace: refused while a process runs in the container, --force or
        // not (issue 58).
        crate::container::refuse_if_busy(&o.ws)?;
        options.paths = crate::files::chosen_paths(o.ws.root(), &args.paths)?;
        // Paths someone else edited since the thread's newest checkpoint: refused unless told.
        options.on_drift = Some(
            args.on_drift
                .unwrap_or(crate::args::OnDrift::Refuse)
                .policy(),
        );
    }
    let call = |options: &RewindOptions| point.rewind(&o.threads, &thread, options);
    // An agent's thread: where the agent's conversation continues is chosen from the plan and
    // kept in the rewind's journal before any file changes (issue 54).
    let agent_thread = cairn_agents::of_thread(&found.metadata).is_some();
    let mut half = crate::agents::AgentHalf::default();
    if args.dry_run || (!repeated && (files || agent_thread)) {
        let mut plan = call(&options)?;
        half = crate::agents::prepare_rewind(&o.threads, &thread, &plan, options.memory)?;
        if args.dry_run {
            // What the rewind would keep, for --json too.
            plan.continuation = half.continuation.as_ref().map(|c| c.data.clone());
            return ctx.emit(&plan, || {
                rewind_text(&plan)
                    + &crate::agents::rewind_words(&half, &plan)
                    + "dry run: nothing was changed\n"
            });
        }
        if files {
            if !ctx.json {
                print!("{}", rewind_text(&plan));
            }
            let (restored, deleted) = file_counts(plan.files.as_ref());
            ctx.confirm(
                "rewind",
                &format!(
                    "Rewind thread {thread} to {point}, restoring {} and deleting {deleted} in {}?",
                    count(restored as u64, "path", "paths"),
                    o.ws.root().display()
                ),
                args.yes,
            )?;
        }
    }
    options.continuation = half.continuation.clone();
    options.dry_run = false;
    let cursor = o.threads.last_cursor()?;
    let bar = ctx.spinner("rewind");
    let report = call(&options);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    crate::agents::settle(&report);
    let not_run = announce_rewind(&o.threads, &thread, cursor, &report, o.ws.root())?;
    let out = crate::trust::WithNotRun {
        report: &report,
        on_rewind_not_run: not_run,
    };
    ctx.emit(&out, || {
        rewind_text(&report)
            + &crate::agents::rewind_words(&half, &report)
            + &crate::trust::not_run_text(&out.on_rewind_not_run)
    })
}

/// Runs the commands `cairn init claude-code --on-rewind` registered for the rewind `report`
/// made, given its `rewind_completed` event (found after `cursor`, taken before the rewind);
/// returns the files whose commands were not run, being untrusted (issue 53).
/// Shared by `cairn rewind`, the MCP server and the Studio.
pub(crate) fn announce_rewind(
    threads: &cairn_rewind::Threads,
    thread: &ThreadId,
    cursor: i64,
    report: &cairn_rewind::RewindReport,
    root: &Path,
) -> Result<Vec<crate::trust::NotRun>> {
    let Some(id) = &report.rewind_id else {
        return Ok(Vec::new());
    };
    let event = threads
        .thread_events_since(thread, cursor, 1000)?
        .into_iter()
        .find(|e| {
            e.kind == cairn_rewind::EventKind::RewindCompleted
                && e.data["rewind_id"].as_str() == Some(id.as_str())
        });
    if let Some(e) = event {
        let doc = serde_json::to_value(&e).map_err(|err| {
            CliError::new(ErrorKind::Panic, format!("cannot encode an event: {err}"))
        })?;
        return Ok(crate::agents::run_on_rewind(root, &doc));
    }
    Ok(Vec::new())
}
