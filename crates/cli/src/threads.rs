//! The commands on threads: thread new, list, log and append; rewind; fork.

use crate::args::{EntryKindArg, ForkArgs, RewindArgs};
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::files::{done_text, plan_text};
use crate::parse::human_time;
use cairn_restore::Workspace;
use cairn_rewind::{
    AppendOptions, Checkpoints, Entry, EntryId, EntryKind, Files, ForkOptions, NewEntry,
    RewindOptions, Thread, ThreadId, Threads, ThreadsOptions,
};
use cairn_store::ErrorKind;
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
    let options = ThreadsOptions {
        checkpoints: Some(Checkpoints::default()),
        workspaces: vec![ws.clone() as Arc<dyn Files>],
        ..ThreadsOptions::default()
    };
    let threads = Threads::open(ctx.threads_db()?, options)?;
    Ok(Opened { ws, threads })
}

/// An entry for `thread log --json`: the entry's fields, and its payload as text.
#[derive(Debug, Serialize)]
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

/// Resolves an entry name: a full id, or a unique prefix of one (with or without `e_`) among
/// the entries the thread sees.
pub(crate) fn resolve_entry(threads: &Threads, thread: &ThreadId, name: &str) -> Result<EntryId> {
    let all = threads.entries(thread, true)?;
    if let Some(e) = all.iter().find(|e| e.id.as_str() == name) {
        return Ok(e.id.clone());
    }
    let with_prefix = format!("{}{name}", EntryId::PREFIX);
    let matches: Vec<&Entry> = all
        .iter()
        .filter(|e| {
            name.len() >= 4
                && (e.id.as_str().starts_with(name) || e.id.as_str().starts_with(&with_prefix))
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(CliError::new(
            ErrorKind::NotFound,
            format!(
                "entry '{name}' not found in thread {thread}; `cairn thread log {thread} --all` lists its entries"
            ),
        )),
        many => Err(CliError::new(
            ErrorKind::InvalidArgument,
            format!(
                "entry prefix '{name}' is ambiguous in thread {thread} ({} entries match); give more characters",
                many.len()
            ),
        )),
    }
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
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
    if all {
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
    let id = ThreadId::new(thread);
    let json = LogJson {
        thread: o.threads.thread(&id)?,
        entries: o
            .threads
            .entries(&id, all)?
            .into_iter()
            .map(EntryJson::from)
            .collect(),
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
        &ThreadId::new(thread),
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
    let _ = writeln!(
        out,
        "  conversation: {} entries {} off the active branch (kept on a branch of their own)",
        r.conversation.cut.len(),
        if r.dry_run { "would be taken" } else { "taken" }
    );
    match &r.files {
        Some(f) => out.push_str(&files_plan_text(f, r.dry_run, &f.root, false)),
        None => out.push_str("  files: left as they are (add --files to restore them)\n"),
    }
    if !r.memory.staled.is_empty() {
        let _ = writeln!(out, "  memory: {} items stale", r.memory.staled.len());
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

pub(crate) fn rewind(ctx: &Ctx, args: &RewindArgs) -> Result<()> {
    if args.files {
        ctx.check_confirmable("rewind --files", args.dry_run, args.yes)?;
    }
    let o = open(ctx, false)?;
    let thread = ThreadId::new(args.thread.as_str());
    o.threads.thread(&thread)?;
    let entry = resolve_entry(&o.threads, &thread, &args.entry)?;
    let mut options = RewindOptions {
        files: Some(args.files),
        memory: !args.no_memory,
        workspace: Some(o.ws.clone() as Arc<dyn Files>),
        dry_run: true,
        force: args.force,
        ..RewindOptions::default()
    };
    if args.dry_run || args.files {
        let plan = o.threads.rewind(&thread, &entry, &options)?;
        if args.dry_run {
            return ctx.emit(&plan, || {
                rewind_text(&plan) + "dry run: nothing was changed\n"
            });
        }
        if !ctx.json {
            print!("{}", rewind_text(&plan));
        }
        let (restored, deleted) = file_counts(plan.files.as_ref());
        ctx.confirm(
            "rewind",
            &format!(
                "Rewind thread {thread} to {entry}, restoring {restored} paths and deleting {deleted} in {}?",
                o.ws.root().display()
            ),
            args.yes,
        )?;
    }
    options.dry_run = false;
    let bar = ctx.spinner("rewind");
    let report = o.threads.rewind(&thread, &entry, &options);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    ctx.emit(&report, || rewind_text(&report))
}

fn fork_text(r: &cairn_rewind::ForkReport, root: &Path) -> String {
    let mut out = if r.dry_run {
        format!(
            "plan: fork thread {} at {} as {}\n",
            r.source_thread_id, r.at_entry_id, r.thread_id
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
            "  {} checkpoints {} into the fork's store",
            r.snapshots_copied.len(),
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

/// The fork's workspace: `--into DIR` (made if missing, and for a dry run removed again if it
/// was), else the current one.
pub(crate) fn fork_workspace(
    ctx: &Ctx,
    into: Option<&Path>,
    dry_run: bool,
) -> Result<(Option<Arc<Workspace>>, Option<PathBuf>)> {
    let Some(dir) = into else {
        return Ok((None, None));
    };
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        ctx.root.join(dir)
    };
    let made = if std::fs::symlink_metadata(&dir).is_err() {
        std::fs::create_dir_all(&dir).map_err(|e| {
            CliError::new(
                ErrorKind::of_io(&e),
                format!("cannot create the fork's directory {}: {e}", dir.display()),
            )
            .with_path(&dir)
        })?;
        dry_run.then(|| dir.clone())
    } else {
        None
    };
    let fork_ctx = Ctx {
        root: dir,
        store: None,
        ..ctx.clone()
    };
    Ok((Some(Arc::new(fork_ctx.open_workspace(true)?)), made))
}

pub(crate) fn fork(ctx: &Ctx, args: &ForkArgs) -> Result<()> {
    if args.files {
        ctx.check_confirmable("fork --files", args.dry_run, args.yes)?;
    }
    let o = open(ctx, false)?;
    let thread = ThreadId::new(args.thread.as_str());
    o.threads.thread(&thread)?;
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
    let (target, made) = fork_workspace(ctx, args.into.as_deref(), args.dry_run)?;
    let outcome = fork_with(ctx, args, &o, &thread, &entry, target);
    if let Some(dir) = made {
        // The dry run made the directory only to look at it: take it away again.
        let _ = std::fs::remove_dir_all(dir);
    }
    outcome
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
            return ctx.emit(&plan, || {
                fork_text(&plan, &root) + "dry run: nothing was made\n"
            });
        }
        if !ctx.json {
            print!("{}", fork_text(&plan, &root));
        }
        // The fork makes the thread the plan named (issue 26: it made another id).
        options.new_thread_id = Some(plan.thread_id.clone());
        let (restored, deleted) = file_counts(plan.files.as_ref());
        ctx.confirm(
            "fork",
            &format!(
                "Fork thread {thread} at {entry}, restoring {restored} paths and deleting {deleted} in {}?",
                root.display()
            ),
            args.yes,
        )?;
    }
    options.dry_run = false;
    let report = o.threads.fork(thread, entry, &options)?;
    ctx.emit(&report, || fork_text(&report, &root))
}
