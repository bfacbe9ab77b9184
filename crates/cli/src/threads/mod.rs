//! The commands on threads: thread new, list, log and append; rewind; fork.

use crate::args::{EntryKindArg, ForkArgs, RewindArgs};
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::files::{done_text, plan_text};
use crate::parse::{count, human_time, one_line};
use cairn_restore::Workspace;
use cairn_rewind::{
    AppendOptions, Checkpoint, CheckpointId, Checkpoints, Entry, EntryId, EntryKind, Files,
    ForkOptions, NewEntry, RewindOptions, Thread, ThreadId, Threads, ThreadsOptions,
};
use cairn_store::{Classify, ErrorKind};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The workspace and the thread database of its store.
pub(crate) struct Opened {
    pub(crate) ws: Arc<Workspace>,
    pub(crate) threads: Threads,
}

/// Opens the workspace (`create`: making its store) and the thread database (`<store>/threads.db`
/// unless `--threads-db` names another file or a PostgreSQL URL), with checkpoints before user
/// messages, finishing rewinds a crash interrupted.
pub(crate) fn open(ctx: &Ctx, create: bool) -> Result<Opened> {
    let ws = Arc::new(ctx.open_workspace(create)?);
    open_on(ctx, ws, true)
}

/// The thread database of `ws`, as [`open`] opens it; `recover`: finishing the rewinds a crash
/// interrupted now (`cairn serve` does it after it starts listening, issue 59).
pub(crate) fn open_on(ctx: &Ctx, ws: Arc<Workspace>, recover: bool) -> Result<Opened> {
    let options = ThreadsOptions {
        checkpoints: Some(Checkpoints::default()),
        workspaces: vec![ws.clone() as Arc<dyn Files>],
        recover,
        ..ThreadsOptions::default()
    };
    let threads = Threads::open(ctx.threads_db()?, options)?;
    Ok(Opened { ws, threads })
}

/// The thread `name`; one the database lacks is `NOT_FOUND` naming the database and the
/// commands that list and make threads.
pub(crate) fn thread_named(threads: &Threads, name: &str) -> Result<Thread> {
    // A name a rewind gave the thread (an agent's continued session) finds it too (issue 54).
    let id = threads
        .resolve(&ThreadId::new(name))
        .unwrap_or_else(|_| ThreadId::new(name));
    match threads.thread(&id) {
        Err(e) if e.kind() == ErrorKind::NotFound => Err(CliError::new(
            ErrorKind::NotFound,
            format!(
                "thread {name} not found in the thread database {}; `cairn thread list` lists its threads and \
                 `cairn thread new --id {name}` makes one (a thread of another database needs --threads-db)",
                threads.path().display()
            ),
        )
        .with_path(threads.path())),
        other => Ok(other?),
    }
}

/// An entry for `thread log --json`: the entry's fields, and its payload as text.
#[derive(Debug, Clone, Serialize)]
pub struct EntryJson {
    /// The entry.
    #[serde(flatten)]
    pub entry: Entry,
    /// Its payload, as text (lossy for bytes that are not UTF-8).
    pub text: String,
}

impl From<Entry> for EntryJson {
    fn from(entry: Entry) -> Self {
        EntryJson {
            text: String::from_utf8_lossy(&entry.payload).into_owned(),
            entry,
        }
    }
}

/// What `cairn thread log --json` prints.
#[derive(Debug, Serialize)]
pub struct LogJson {
    /// The thread.
    pub thread: Thread,
    /// Its entries in the order they were written: the active branch, or with `--all` every
    /// entry the thread sees (`on_active_branch` says which).
    pub entries: Vec<EntryJson>,
}

/// What `cairn thread list --json` prints.
#[derive(Debug, Serialize)]
pub struct ListJson {
    /// Every thread, oldest first.
    pub threads: Vec<Thread>,
}

/// Resolves a name among `ids`: a full id, or a unique prefix of 4+ characters (with or
/// without `prefix`, the ids' own). `what` names them in errors, `hint` says how to list them.
fn pick_unique<I: Clone + AsRef<str>>(
    ids: &[I],
    name: &str,
    prefix: &str,
    what: &str,
    hint: &str,
) -> Result<I> {
    if let Some(id) = ids.iter().find(|i| i.as_ref() == name) {
        return Ok(id.clone());
    }
    let bare = name.strip_prefix(prefix).unwrap_or(name);
    let with_prefix = format!("{prefix}{bare}");
    let matches: Vec<&I> = ids
        .iter()
        .filter(|i| bare.len() >= 4 && i.as_ref().starts_with(&with_prefix))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(CliError::new(
            ErrorKind::NotFound,
            format!("{what} '{name}' not found; {hint}"),
        )),
        many => Err(CliError::new(
            ErrorKind::InvalidArgument,
            format!(
                "{what} prefix '{name}' is ambiguous ({} match); give more characters",
                many.len()
            ),
        )),
    }
}

/// Resolves an entry name: a full id, or a unique prefix of one (with or without `e_`) among
/// the entries the thread sees.
pub(crate) fn resolve_entry(threads: &Threads, thread: &ThreadId, name: &str) -> Result<EntryId> {
    let ids: Vec<EntryId> = threads
        .entries(thread, true)?
        .into_iter()
        .map(|e| e.id)
        .collect();
    pick_unique(
        &ids,
        name,
        EntryId::PREFIX,
        &format!("entry of thread {thread}"),
        &format!("`cairn thread log {thread} --all` lists its entries"),
    )
}

fn log_text(json: &LogJson, all: bool) -> String {
    let t = &json.thread;
    let mut out = format!("thread {}", t.id);
    if let (Some(p), Some(e)) = (&t.parent_thread, &t.fork_entry) {
        let _ = write!(out, " (forked from {p} at {e})");
    }
    out.push('\n');
    if json.entries.is_empty() {
        out.push_str("  no entries yet; add one with `cairn thread append`\n");
    }
    for e in &json.entries {
        let mark = if all && !e.entry.on_active_branch {
            "x"
        } else {
            " "
        };
        let files = if e.entry.checkpoint.is_some() {
            " [files]"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{mark} {}  {:<9}  {}{files}",
            e.entry.id,
            e.entry.kind.name(),
            one_line(&e.text, 60)
        );
    }
    if all && json.entries.iter().any(|e| !e.entry.on_active_branch) {
        out.push_str("  (x: off the active branch, cut by a rewind)\n");
    }
    out
}

pub(crate) fn new(ctx: &Ctx, id: Option<String>) -> Result<()> {
    let o = open(ctx, true)?;
    let thread = o
        .threads
        .create_thread(id.map(ThreadId::new), serde_json::json!({}))?;
    ctx.emit(&thread, || {
        format!(
            "thread {} created; add entries with `cairn thread append {} --kind user --text ...`\n",
            thread.id, thread.id
        )
    })
}

pub(crate) fn list(ctx: &Ctx) -> Result<()> {
    let o = open(ctx, false)?;
    let json = ListJson {
        threads: o.threads.threads()?,
    };
    ctx.emit(&json, || {
        let mut out = String::new();
        if json.threads.is_empty() {
            out.push_str("no threads yet; start one with `cairn thread new`\n");
        }
        for t in &json.threads {
            let _ = write!(
                out,
                "{}  {}  leaf {}",
                t.id,
                human_time(t.created_ms),
                t.active_leaf.as_ref().map(|e| e.as_str()).unwrap_or("-")
            );
            if let Some(p) = &t.parent_thread {
                let _ = write!(out, "  forked from {p}");
            }
            out.push('\n');
        }
        out
    })
}

pub(crate) fn log(ctx: &Ctx, thread: &str, all: bool) -> Result<()> {
    let o = open(ctx, false)?;
    let found = thread_named(&o.threads, thread)?;
    let json = LogJson {
        entries: o
            .threads
            .entries(&found.id, all)?
            .into_iter()
            .map(EntryJson::from)
            .collect(),
        thread: found,
    };
    ctx.emit(&json, || log_text(&json, all))
}

pub(crate) fn append(
    ctx: &Ctx,
    thread: &str,
    kind: EntryKindArg,
    text: Option<String>,
    key: Option<String>,
) -> Result<()> {
    let o = open(ctx, false)?;
    let thread = thread_named(&o.threads, thread)?.id;
    let kind = match kind {
        EntryKindArg::User => EntryKind::User,
        EntryKindArg::Assistant => EntryKind::Assistant,
        EntryKindArg::Tool => EntryKind::Tool,
        EntryKindArg::Note => EntryKind::Note,
    };
    let options = AppendOptions {
        workspace: Some(o.ws.clone() as Arc<dyn Files>),
        key,
        ..AppendOptions::default()
    };
    let appended = o.threads.append(
        &thread,
        NewEntry::new(kind, text.unwrap_or_default()),
        &options,
    )?;
    ctx.emit(&appended, || {
        let mut out = format!(
            "{} entry {} appended to thread {thread}",
            appended.entry.kind.name(),
            appended.entry.id
        );
        if appended.repeated {
            out.push_str(" (its key was seen before: nothing new was written)");
        }
        if let Some(cp) = &appended.checkpoint {
            let _ = write!(
                out,
                "; checkpoint of the files before it: snapshot {}",
                cp.snapshot_id.short()
            );
        }
        if let Some(e) = &appended.checkpoint_error {
            let _ = write!(
                out,
                "; its checkpoint failed ({}): {}",
                e.kind.name(),
                e.message
            );
        }
        out.push('\n');
        out
    })
}

/// The restore part of a files report, for people.
/// `root` is the workspace restored (a fork's report names the checkpoint's own).
fn files_plan_text(
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

fn file_counts(files: Option<&cairn_rewind::FilesReport>) -> (usize, usize) {
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

/// A fork's report for people; a plan whose id the fork chooses (`named` false) names none.
fn fork_text(r: &cairn_rewind::ForkReport, root: &Path, named: bool) -> String {
    let mut out = if r.dry_run {
        let id = if named {
            r.thread_id.to_string()
        } else {
            format!("a new thread (its id is {UNCHOSEN_ID})")
        };
        format!(
            "plan: fork thread {} at {} as {id}\n",
            r.source_thread_id, r.at_entry_id
        )
    } else {
        format!(
            "forked thread {} at {} as {}\n",
            r.source_thread_id, r.at_entry_id, r.thread_id
        )
    };
    if !r.snapshots_copied.is_empty() {
        let _ = writeln!(
            out,
            "  {} {} into the fork's store",
            count(r.snapshots_copied.len() as u64, "checkpoint", "checkpoints"),
            if r.dry_run { "to copy" } else { "copied" }
        );
    }
    match &r.files {
        Some(f) => out.push_str(&files_plan_text(f, r.dry_run, root, true)),
        None => {
            out.push_str("  files: none (add --files to give the fork the files at that point)\n")
        }
    }
    out
}

/// What opening a fork's workspace made that was not there: the topmost directory of `--into`
/// made, and the topmost directory of its store made (in the data directory, or `.cairn`).
/// A dry run (and a Studio plan) takes them away again with [`Made::undo`], so that it leaves
/// the file system as it was (issue 53.8).
#[derive(Debug, Default)]
pub(crate) struct Made {
    dir: Option<PathBuf>,
    store: Option<PathBuf>,
}

impl Made {
    /// Removes what was made: the store first (it may lie inside the directory), then the
    /// directory.
    pub(crate) fn undo(self) {
        for path in [self.store, self.dir].into_iter().flatten() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// The topmost directory of `path` that does not exist (`path` itself when only it is
/// missing), or `None` when `path` exists.
fn first_missing(path: &Path) -> Option<PathBuf> {
    let mut missing = None;
    for p in path.ancestors() {
        if std::fs::symlink_metadata(p).is_ok() {
            break;
        }
        missing = Some(p.to_path_buf());
    }
    missing
}

/// The fork's workspace: `--into DIR` (made if missing, with its store), else the current
/// one, and what opening it made (see [`Made`]).
pub(crate) fn fork_workspace(
    ctx: &Ctx,
    into: Option<&Path>,
) -> Result<(Option<Arc<Workspace>>, Made)> {
    let Some(dir) = into else {
        return Ok((None, Made::default()));
    };
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        ctx.root.join(dir)
    };
    let mut made = Made {
        dir: first_missing(&dir),
        store: None,
    };
    std::fs::create_dir_all(&dir).map_err(|e| {
        CliError::new(
            ErrorKind::of_io(&e),
            format!("cannot create the fork's directory {}: {e}", dir.display()),
        )
        .with_path(&dir)
    })?;
    let fork_ctx = Ctx {
        root: dir,
        store: None,
        ..ctx.clone()
    };
    // Where its store goes, to know whether opening it makes the store.
    let store = std::fs::canonicalize(&fork_ctx.root)
        .ok()
        .and_then(|root| cairn_restore::home::locate(&root, None, true).ok())
        .map(|(store, _, _)| store);
    made.store = store.as_deref().and_then(first_missing);
    match fork_ctx.open_workspace(true) {
        Ok(ws) => Ok((Some(Arc::new(ws)), made)),
        Err(e) => {
            made.undo();
            Err(e)
        }
    }
}

pub(crate) fn fork(ctx: &Ctx, args: &ForkArgs) -> Result<()> {
    if args.files {
        ctx.check_confirmable("fork --files", args.dry_run, args.yes)?;
    }
    let o = open(ctx, false)?;
    let thread = thread_named(&o.threads, &args.thread)?.id;
    let entry = resolve_entry(&o.threads, &thread, &args.entry)?;
    if let (true, Some(dir)) = (args.files, &args.into) {
        // Before the directory or its store is made: a fork into the source, its store or
        // someone's files is refused with nothing changed.
        o.threads.check_fork_target(
            &thread,
            o.ws.as_ref(),
            &ctx.root.join(dir),
            None,
            args.force,
        )?;
    }
    let (target, made) = fork_workspace(ctx, args.into.as_deref())?;
    if args.files {
        // The workspace the files go to, when it is a container's: refused while a process
        // runs in the container, --force or not (issue 58).
        if let Err(e) = crate::container::refuse_if_busy(target.as_deref().unwrap_or(&o.ws)) {
            made.undo();
            return Err(e);
        }
    }
    let outcome = fork_with(ctx, args, &o, &thread, &entry, target);
    if args.dry_run {
        // The dry run made the directory and its store only to look at them: take them away
        // again.
        made.undo();
    }
    outcome
}

/// What a fork's dry run says of the new thread's id when `--new-id` does not name it: the
/// fork chooses its id when it is made, so the plan shows none rather than one it would not get
/// (issue 53.8).
const UNCHOSEN_ID: &str = "chosen when the fork is made; pass --new-id to choose it";

/// Prints a fork's dry run; unless `named` (`--new-id`), with no thread id but a note that
/// the fork chooses it.
fn emit_fork_plan(
    ctx: &Ctx,
    plan: &cairn_rewind::ForkReport,
    root: &Path,
    named: bool,
) -> Result<()> {
    let mut doc = serde_json::to_value(plan)
        .map_err(|e| CliError::new(ErrorKind::Panic, format!("cannot encode the report: {e}")))?;
    if !named {
        doc["thread_id"] = serde_json::Value::Null;
        doc["thread_id_note"] = UNCHOSEN_ID.into();
    }
    ctx.emit(&doc, || {
        fork_text(plan, root, named) + "dry run: nothing was made\n"
    })
}

fn fork_with(
    ctx: &Ctx,
    args: &ForkArgs,
    o: &Opened,
    thread: &ThreadId,
    entry: &EntryId,
    target: Option<Arc<Workspace>>,
) -> Result<()> {
    let source = o.ws.clone() as Arc<dyn Files>;
    let workspace = target.clone().map(|t| t as Arc<dyn Files>);
    let root = target
        .as_ref()
        .map(|t| t.root().to_path_buf())
        .unwrap_or_else(|| o.ws.root().to_path_buf());
    let mut options = ForkOptions {
        files: args.files,
        workspace: Some(workspace.clone().unwrap_or_else(|| source.clone())),
        source: workspace.as_ref().map(|_| source.clone()),
        new_thread_id: args.new_id.clone().map(ThreadId::new),
        dry_run: true,
        force: args.force,
        replace: args.force,
        ..ForkOptions::default()
    };
    if args.dry_run || args.files {
        let plan = o.threads.fork(thread, entry, &options)?;
        if args.dry_run {
            return emit_fork_plan(ctx, &plan, &root, args.new_id.is_some());
        }
        if !ctx.json {
            print!("{}", fork_text(&plan, &root, true));
        }
        // The fork makes the thread the plan named (issue 26: it made another id).
        options.new_thread_id = Some(plan.thread_id.clone());
        let (restored, deleted) = file_counts(plan.files.as_ref());
        ctx.confirm(
            "fork",
            &format!(
                "Fork thread {thread} at {entry}, restoring {} and deleting {deleted} in {}?",
                count(restored as u64, "path", "paths"),
                root.display()
            ),
            args.yes,
        )?;
    }
    options.dry_run = false;
    let report = o.threads.fork(thread, entry, &options)?;
    // The fork's directory finds its thread: its store names this thread database.
    let link = match &target {
        Some(t) => Some(link_threads_db(ctx, o, t)?),
        None => None,
    };
    ctx.emit(&report, || {
        let mut out = fork_text(&report, &root, true);
        match &link {
            Some(Ok(())) => {
                let _ = writeln!(
                    out,
                    "  `cairn -C {} thread log {}` shows it (the fork's store names this thread database)",
                    root.display(),
                    report.thread_id
                );
            }
            Some(Err(why)) => {
                let _ = writeln!(
                    out,
                    "  {why}: `cairn -C {} --threads-db {} thread log {}` shows it",
                    root.display(),
                    o.threads.path().display(),
                    report.thread_id
                );
            }
            None => {}
        }
        out
    })
}

/// Makes the fork's store name the thread database the fork was made in (its `threads-db`
/// file), so that commands in the fork's directory find its thread without `--threads-db`.
/// `Err(why)` when it is better left unnamed: the fork's store has a thread database of its
/// own (its threads stay where they are), or the database is a URL with a password (never
/// written into a file).
fn link_threads_db(
    ctx: &Ctx,
    o: &Opened,
    target: &Workspace,
) -> Result<std::result::Result<(), String>> {
    let store = target.store().path().to_path_buf();
    let db = ctx.threads_db()?;
    let text = db.to_string_lossy().into_owned();
    let named = if cairn_rewind::is_pg_url(&text) {
        if cairn_rewind::redact_url(&text) != text {
            return Ok(Err(
                "the thread database's URL holds a password, which is not written into the fork's store".into(),
            ));
        }
        text
    } else {
        std::fs::canonicalize(&db)
            .unwrap_or(db)
            .to_string_lossy()
            .into_owned()
    };
    let own = store.join(cairn_rewind::DB_FILE);
    if std::fs::symlink_metadata(&own).is_ok()
        && !cairn_store::fsutil::same_path(&own, o.threads.path())
    {
        return Ok(Err(format!(
            "the fork's store has a thread database of its own ({})",
            own.display()
        )));
    }
    cairn_store::fsutil::write_atomic(
        &store,
        &store.join(crate::ctx::THREADS_DB_LINK),
        format!("{named}\n").as_bytes(),
    )?;
    Ok(Ok(()))
}

/// How often `cairn events --follow` looks for new events.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// `cairn events`: the event log after `since`, one event a line (JSON with `--json`), and with
/// `follow` every later event as it comes. A closed stdout (a reader that stopped) ends it.
pub(crate) fn events(ctx: &Ctx, since: i64, follow: bool, thread: Option<&str>) -> Result<()> {
    use std::io::Write as _;
    let o = open(ctx, false)?;
    let thread = match thread {
        Some(t) => Some(thread_named(&o.threads, t)?.id),
        None => None,
    };
    let mut cursor = since;
    let stdout = std::io::stdout();
    loop {
        let batch = match &thread {
            Some(t) => o.threads.thread_events_since(t, cursor, 500)?,
            None => o.threads.events_since(cursor, 500)?,
        };
        if batch.is_empty() {
            if !follow {
                return Ok(());
            }
            std::thread::sleep(FOLLOW_POLL);
            continue;
        }
        let mut out = stdout.lock();
        for e in &batch {
            cursor = e.cursor;
            let line = if ctx.json {
                serde_json::to_string(e).map_err(|err| {
                    CliError::new(ErrorKind::Panic, format!("cannot encode an event: {err}"))
                })?
            } else {
                format!(
                    "{:>6}  {}  {:<18} {:<12} {}",
                    e.cursor,
                    human_time(e.created_ms),
                    serde_json::to_value(e.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    e.thread_id
                        .as_ref()
                        .map(|t| t.to_string())
                        .unwrap_or_default(),
                    e.data
                )
            };
            if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
                // The reader went away: nothing more to say to anyone.
                return Ok(());
            }
        }
    }
}
