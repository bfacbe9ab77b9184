//! What every command shares: where the workspace and its store are, how to print, how to ask.

use crate::error::{CliError, Result};
use cairn_restore::home::StoreHome;
use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_store::{ErrorKind, Store, StoreOptions};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Set to `1` to ask for confirmation on standard input even when it is not a terminal (tests
/// of the prompt use it; it never confirms anything by itself).
pub const FORCE_PROMPT_ENV: &str = "CAIRN_FORCE_PROMPT";

/// The environment variable naming the thread database when `--threads-db` does not.
pub const THREADS_DB_ENV: &str = "CAIRN_THREADS_DB";

/// The context of one invocation.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The workspace root as given (`-C DIR`, else `.`).
    pub root: PathBuf,
    /// The store directory as given (`--store`), relative paths taken from the root.
    pub store: Option<PathBuf>,
    /// The thread database as given (`--threads-db`, else `$CAIRN_THREADS_DB`): a path
    /// (relative ones taken from the root) or a PostgreSQL URL.
    pub threads_db: Option<String>,
    /// Print one JSON document.
    pub json: bool,
    /// Questions can be asked (stdin and stderr are terminals).
    pub interactive: bool,
    /// Progress bars can be drawn (stderr is a terminal and not `--json`).
    pub progress: bool,
    /// The remote the store mirrors into (`--remote`, else `$CAIRN_REMOTE`).
    pub remote: Option<String>,
    /// Where [`Ctx::emit`] puts what a command reports instead of printing it (`cairn mcp`
    /// answers a tool call with it); `None` prints.
    pub capture: Option<Capture>,
    /// Accept `/` or a pseudo file system as the root (`--force-root`).
    pub force_root: bool,
}

/// What a command reported, kept by a capturing context ([`Ctx::capture`]).
#[derive(Debug, Clone)]
pub struct Emitted {
    /// The document `--json` prints.
    pub json: serde_json::Value,
    /// The text printed for people.
    pub text: String,
}

/// The slot a capturing context fills: the last report of the command run with it.
pub type Capture = Arc<Mutex<Option<Emitted>>>;

/// A file in a store that names the thread database its workspace's threads live in, when
/// that is not the store's own `threads.db`: `cairn fork --into DIR` writes it into the
/// fork's store, so that `cairn -C DIR thread log <fork>` finds the fork's thread. One line:
/// the database's absolute path, or a PostgreSQL URL without a password.
pub const THREADS_DB_LINK: &str = "threads-db";

/// The thread database `<store>/threads-db` names, if the file is there. A symlink planted
/// there is refused as `CORRUPT` (never followed), as the database files are.
pub fn read_threads_db_link(store: &Path) -> Result<Option<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    let path = store.join(THREADS_DB_LINK);
    let bad = |detail: &str| {
        CliError::new(
            ErrorKind::Corrupt,
            format!(
                "{}: {detail}; remove it (then pass --threads-db to name the thread database)",
                path.display()
            ),
        )
        .with_path(&path)
    };
    let io = |e: std::io::Error| {
        CliError::new(
            ErrorKind::of_io(&e),
            format!("cannot read {}: {e}", path.display()),
        )
        .with_path(&path)
    };
    let link = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if !link.file_type().is_file() {
        return Err(bad("not a regular file (a symlink is never followed)"));
    }
    let file = std::fs::File::open(&path).map_err(io)?;
    let opened = file.metadata().map_err(io)?;
    if (opened.dev(), opened.ino()) != (link.dev(), link.ino()) {
        return Err(bad("replaced while it was opened"));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, 64 * 1024), &mut text)
        .map_err(|_| bad("not text"))?;
    let named = text.trim();
    if named.is_empty() || !(cairn_rewind::is_pg_url(named) || named.starts_with('/')) {
        return Err(bad("it names no thread database"));
    }
    Ok(Some(PathBuf::from(named)))
}

/// The variable that names a remote when `--remote` is not given.
pub const REMOTE_ENV: &str = "CAIRN_REMOTE";

impl Ctx {
    /// The context for the parsed global options.
    pub fn new(dir: Option<PathBuf>, store: Option<PathBuf>, json: bool) -> Ctx {
        let root = dir.unwrap_or_else(|| PathBuf::from("."));
        // Absolute, so that every message names a path that means something anywhere.
        let root = std::path::absolute(&root).unwrap_or(root);
        let store = store.map(|s| if s.is_absolute() { s } else { root.join(s) });
        let stderr_tty = std::io::stderr().is_terminal();
        let forced = std::env::var(FORCE_PROMPT_ENV).is_ok_and(|v| v == "1");
        Ctx {
            interactive: forced || (std::io::stdin().is_terminal() && stderr_tty),
            progress: stderr_tty && !json,
            root,
            store,
            threads_db: None,
            json,
            remote: None,
            capture: None,
            force_root: false,
        }
    }

    /// Refuses a root that is `/` or lies on a pseudo file system (proc, sysfs, devtmpfs,
    /// cgroup, ...) unless `--force-root`: a snapshot of it walks the whole machine, `/proc`
    /// included, or files the kernel makes up, and a restore there could rewrite the system.
    pub fn check_root(&self) -> Result<()> {
        if self.force_root {
            return Ok(());
        }
        let root = self.canonical_root();
        if root == Path::new("/") {
            return Err(CliError::new(
                ErrorKind::InvalidArgument,
                "refusing / as a workspace root: a snapshot would walk the whole machine, /proc \
                 and every user's files included; name a project directory with -C DIR, or pass \
                 --force-root if you mean it",
            )
            .with_path(root));
        }
        if let Some(fs) = pseudo_file_system(&root) {
            return Err(CliError::new(
                ErrorKind::InvalidArgument,
                format!(
                    "refusing {} as a workspace root: it is on the {fs} pseudo file system, whose \
                     files the kernel makes up; name a project directory with -C DIR, or pass \
                     --force-root if you mean it",
                    root.display()
                ),
            )
            .with_path(root));
        }
        Ok(())
    }

    /// The context with the remote `--remote` names, else `$CAIRN_REMOTE` (empty: none).
    pub fn with_remote(mut self, remote: Option<String>) -> Ctx {
        self.remote = remote
            .or_else(|| std::env::var(REMOTE_ENV).ok())
            .filter(|r| !r.is_empty());
        self
    }

    /// How the store is opened: created when `create` (a cache of a remote always is).
    pub(crate) fn store_options(&self, create: bool) -> Result<StoreOptions> {
        match &self.remote {
            Some(url) => Ok(cairn_remote::store_options(
                url,
                &cairn_remote::RemoteOptions::default(),
            )?),
            None => Ok(StoreOptions {
                create,
                ..StoreOptions::default()
            }),
        }
    }

    /// The thread database: `--threads-db` (or `$CAIRN_THREADS_DB`), else the one the store's
    /// `threads-db` file names (a fork's workspace, see [`THREADS_DB_LINK`]), else
    /// `<store>/threads.db`.
    pub fn threads_db(&self) -> Result<PathBuf> {
        self.threads_db_with(|| self.store_path())
    }

    /// [`Ctx::threads_db`], with the store (when one is needed) from `store`: a caller that
    /// has opened the workspace passes its store rather than have it searched for again.
    pub(crate) fn threads_db_with(
        &self,
        store: impl FnOnce() -> Result<PathBuf>,
    ) -> Result<PathBuf> {
        match &self.threads_db {
            Some(url) if cairn_rewind::is_pg_url(url) => Ok(PathBuf::from(url)),
            Some(path) => Ok(self.root.join(path)),
            None => {
                let store = store()?;
                match read_threads_db_link(&store)? {
                    Some(named) => Ok(named),
                    None => Ok(store.join(cairn_rewind::DB_FILE)),
                }
            }
        }
    }

    /// The workspace root, canonical when it exists.
    pub fn canonical_root(&self) -> PathBuf {
        std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone())
    }

    /// Where the store is, and why there: `--store`, else `$CAIRN_STORE`, else a legacy
    /// `<root>/.cairn`, else the workspace's store in the data directory (the one that records
    /// this root's identity, when the workspace was renamed: see
    /// [`cairn_restore::home::locate`]).
    pub fn store_location(&self) -> Result<(PathBuf, StoreHome)> {
        let (store, home, _) = self.workspace_location()?;
        Ok((store, home))
    }

    /// [`Ctx::store_location`] and the workspace id the root has in that store: the one its
    /// identity is recorded under, else the one its path gives.
    pub fn workspace_location(&self) -> Result<(PathBuf, StoreHome, String)> {
        let root = self.canonical_root();
        let (store, home, found) = cairn_restore::home::locate(&root, self.store.as_deref(), true)?;
        let id = found.unwrap_or_else(|| cairn_restore::default_workspace_id(&root));
        Ok((store, home, id))
    }

    /// The store directory (see [`Ctx::store_location`]).
    pub fn store_path(&self) -> Result<PathBuf> {
        Ok(self.store_location()?.0)
    }

    fn require_store(&self) -> Result<()> {
        if self.remote.is_some() {
            // The remote holds the store; the directory is only this machine's cache of it.
            return Ok(());
        }
        let path = self.store_path()?;
        if std::fs::symlink_metadata(&path).is_err() {
            return Err(CliError::new(
                ErrorKind::NotFound,
                format!(
                    "no Cairn store for {} at {}; take a snapshot first (`cairn snapshot`), name \
                     the store with --store, or find it with `cairn stores`",
                    self.root.display(),
                    path.display()
                ),
            )
            .with_path(path));
        }
        Ok(())
    }

    /// Opens the existing store.
    pub fn open_store(&self) -> Result<Store> {
        self.require_store()?;
        Ok(Store::open(self.store_path()?, self.store_options(false)?)?)
    }

    /// Opens the workspace; `create` makes its store when it has none. Restores a crash
    /// interrupted are finished first, and said so on stderr.
    pub fn open_workspace(&self, create: bool) -> Result<Workspace> {
        self.open_workspace_with(create, true)
    }

    /// [`Ctx::open_workspace`], with or without finishing interrupted restores.
    pub fn open_workspace_with(&self, create: bool, recover: bool) -> Result<Workspace> {
        self.check_root()?;
        if !create {
            self.require_store()?;
        }
        let options = WorkspaceOptions {
            store: self.store.clone(),
            recover,
            store_options: self.store_options(create)?,
            ..WorkspaceOptions::default()
        };
        let ws = Workspace::open(&self.root, options)?;
        // A thread database kept beneath the root (`--threads-db ./threads.db`) is Cairn's own:
        // no snapshot or restore of this command captures or writes it (issue 34.5).
        // The store the workspace opened names it: it is not searched for again.
        if let Ok(db) = self.threads_db_with(|| Ok(ws.store().path().to_path_buf())) {
            if !db.to_str().is_some_and(cairn_rewind::is_pg_url) {
                ws.keep_out(&db);
            }
        }
        for r in ws.recovered() {
            let what = if r.completed {
                "finished"
            } else {
                "could not finish"
            };
            self.note(&format!(
                "{what} an interrupted restore of {} (journal {}); `cairn recover` says more",
                r.target.short(),
                r.journal
            ));
        }
        Ok(ws)
    }

    /// A note for people on stderr (not with `--json`).
    pub fn note(&self, text: &str) {
        if !self.json {
            eprintln!("cairn: {text}");
        }
    }

    /// Prints `value` as JSON with `--json`, else the text `human` makes.
    pub fn emit<T: Serialize>(&self, value: &T, human: impl FnOnce() -> String) -> Result<()> {
        if let Some(capture) = &self.capture {
            let json = serde_json::to_value(value).map_err(|e| {
                CliError::new(ErrorKind::Panic, format!("cannot encode the report: {e}"))
            })?;
            let emitted = Emitted {
                json,
                text: human(),
            };
            *capture.lock().unwrap_or_else(PoisonError::into_inner) = Some(emitted);
            return Ok(());
        }
        let text = if self.json {
            let mut s = serde_json::to_string_pretty(value).map_err(|e| {
                CliError::new(ErrorKind::Panic, format!("cannot encode the report: {e}"))
            })?;
            s.push('\n');
            s
        } else {
            human()
        };
        let mut out = std::io::stdout().lock();
        // A closed pipe (`cairn list | head`) is not an error worth reporting.
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        Ok(())
    }

    /// A spinner on stderr, only on a terminal and not with `--json`.
    pub fn spinner(&self, message: &str) -> Option<ProgressBar> {
        if !self.progress {
            return None;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
            bar.set_style(style);
        }
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        Some(bar)
    }

    /// Checks, before any work, that a destructive command can be confirmed: with `--json` it
    /// needs `--dry-run` or `--yes`, as it never prompts.
    pub fn check_confirmable(&self, command: &str, dry_run: bool, yes: bool) -> Result<()> {
        if self.json && !dry_run && !yes {
            return Err(CliError::usage(format!(
                "`cairn {command} --json` never asks: add --dry-run to see the plan, or --yes to go ahead"
            )));
        }
        Ok(())
    }

    /// Asks `question` once the plan is shown: `--yes` confirms; on a terminal the answer
    /// decides (no is `CANCELLED`); without one the command refuses (a usage error).
    pub fn confirm(&self, command: &str, question: &str, yes: bool) -> Result<()> {
        if yes {
            return Ok(());
        }
        if !self.interactive {
            return Err(CliError::usage(format!(
                "refusing to {command} without confirmation: there is no terminal to ask on; \
                 nothing was changed; run again with --yes to go ahead (or --dry-run to see the plan)"
            )));
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{question} [y/N] ");
        let _ = err.flush();
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot read the answer: {e}")))?;
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Ok(()),
            _ => Err(CliError::new(
                ErrorKind::Cancelled,
                format!("{command} cancelled at the prompt; nothing was changed"),
            )),
        }
    }
}

/// The name of the pseudo file system `path` lies on, if it does (by `statfs`'s magic number;
/// a devtmpfs reports tmpfs's, a real file system's, and is not refused).
fn pseudo_file_system(path: &Path) -> Option<&'static str> {
    let st = rustix::fs::statfs(path).ok()?;
    // From linux/magic.h.
    let name = match st.f_type as u64 {
        0x9fa0 => "proc",
        0x6265_6572 => "sysfs",
        0x1cd1 => "devpts",
        0x0027_e0eb => "cgroup",
        0x6367_7270 => "cgroup2",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0xcafe_4a11 => "bpf",
        0x6165_676c => "pstore",
        0xf97c_ff8c => "selinuxfs",
        0x4249_4e4d => "binfmt_misc",
        0x6e73_6673 => "nsfs",
        0x6265_6570 => "configfs",
        0x9584_58f6 => "hugetlbfs",
        _ => return None,
    };
    Some(name)
}
