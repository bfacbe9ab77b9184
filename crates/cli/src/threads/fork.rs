//! `cairn fork`: a thread (and with `--files` its files) continued from an entry, in place
//! or in a directory of its own.

use super::rewind::{file_counts, files_plan_text};
use super::{open, resolve_entry, thread_named, Opened};
use crate::args::ForkArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::count;
use cairn_restore::Workspace;
use cairn_rewind::{EntryId, Files, ForkOptions, ThreadId};
use cairn_store::ErrorKind;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
