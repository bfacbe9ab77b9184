//! The commands on threads: thread new, list, log and append; rewind; fork.

mod fork;
mod rewind;

pub(crate) use fork::{fork, fork_workspace, Made};
pub(crate) use rewind::{announce_rewind, keyed_rewind, rewind, Point};

use crate::args::EntryKindArg;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::{human_time, one_line};
use cairn_restore::Workspace;
use cairn_rewind::{
    AppendOptions, Checkpoints, Entry, EntryId, EntryKind, Files, NewEntry, Thread, ThreadId,
    Threads, ThreadsOptions,
};
use cairn_store::{Classify, ErrorKind};
use serde::Serialize;
use std::fmt::Write as _;
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
