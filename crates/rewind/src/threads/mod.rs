//! The [`Threads`] handle: opening the database, threads, entries, appends and checkpoints.

use crate::db::{self, Backend, Holder};
use crate::error::{DbResult, Error, FilesError, Result};
use crate::files::{CheckpointRequest, Files};
use crate::ids::{CheckpointId, EntryId, RunId, ThreadId};
use crate::model::{
    root_bytes, root_path, Branch, Checkpoint, CheckpointKind, Entry, EntryKind, EventKind,
    NewEntry, Thread, FILE_CHECKPOINT_KEY,
};
use crate::policy::{Checkpoints, EffectivePolicy};
use crate::rows::{
    active_entries, emit, lineage_entries, load_checkpoint, load_entry, note_workspace,
    require_thread, HoldRow,
};
use crate::runs::{Run, RunShared};
use crate::sql::{params, Conn, OptionalExtension, PgClient};
use cairn_store::{Classify, ErrorKind, SnapshotId};
use parking_lot::Mutex;
use rusqlite::TransactionBehavior;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

mod append;
mod checkpoint;
mod inbox;

use append::check_object;
use checkpoint::{metadata_with_checkpoint, record_checkpoint, TakenCheckpoint};
pub(crate) use inbox::cancel_queued;
pub use inbox::{Admission, DeliverOptions, Delivery, PromptState};

/// The file name of the database inside a store directory.
pub const DB_FILE: &str = "threads.db";

/// How often waits poll the database.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// How to open the thread database. `Default` is the safest choice.
#[derive(Clone)]
pub struct ThreadsOptions {
    /// The runtime level of the checkpoint policy (see [`crate::policy`]). Default: none set,
    /// so checkpoints are off unless an agent or run turns them on.
    pub checkpoints: Option<Checkpoints>,
    /// Whether a rewind restores files when its options do not say. Default `false`:
    /// restoring rewrites and removes files, so it is opt-in.
    pub rewind_files: bool,
    /// How long to wait for another connection's write lock (SQLite's busy timeout,
    /// PostgreSQL's `lock_timeout`). Default 10 s.
    pub busy_timeout: Duration,
    /// Finish (or fail) rewinds a crash interrupted, when opening. Default on.
    pub recover: bool,
    /// The workspaces recovery may ask whether an interrupted restore finished.
    pub workspaces: Vec<Arc<dyn Files>>,
}

impl Default for ThreadsOptions {
    fn default() -> Self {
        ThreadsOptions {
            checkpoints: None,
            rewind_files: false,
            busy_timeout: Duration::from_secs(10),
            recover: true,
            workspaces: Vec::new(),
        }
    }
}

impl std::fmt::Debug for ThreadsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadsOptions")
            .field("checkpoints", &self.checkpoints)
            .field("rewind_files", &self.rewind_files)
            .field("busy_timeout", &self.busy_timeout)
            .field("recover", &self.recover)
            .field(
                "workspaces",
                &self.workspaces.iter().map(|w| w.id()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The thread database: threads, entries, checkpoints, memory, runs, rewinds, forks and events.
///
/// Several handles, in one process or several, may share one database file. A handle is
/// `Send + Sync` and cheap to clone; its clones share one connection.
#[derive(Clone)]
pub struct Threads {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Threads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Threads")
            .field("path", &self.inner.path)
            .field("holder", &self.inner.holder.id())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) path: PathBuf,
    conn: Mutex<Backend>,
    pub(crate) holder: Holder,
    pub(crate) options: ThreadsOptions,
    pub(crate) runs: Mutex<HashMap<RunId, Weak<RunShared>>>,
    ops: Mutex<HashSet<String>>,
}

impl Inner {
    /// Tells `ws` that this SQLite database (with its `-wal`, `-shm`, `-journal`) is Cairn's
    /// own, so that a database given with `--threads-db` inside the workspace is left out of
    /// its checkpoints and never planned for restore (it changes under every rewind, which
    /// would otherwise refuse as `CONFLICT`, and an old checkpoint holding it would write over
    /// the live threads). A PostgreSQL database has no file.
    pub(crate) fn keep_out_of(&self, ws: &dyn Files) {
        // By its location, not its connection: this may run while the connection is held.
        if !self.path.to_str().is_some_and(crate::db::is_pg_url) {
            ws.keep_out(&self.path);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Release this handle's advisory locks now, rather than when the server notices the
        // closed connection: whoever looks next sees at once that this handle is gone.
        if let Backend::Pg(pg) = self.conn.get_mut() {
            let _ = pg.batch("SELECT pg_advisory_unlock_all()");
        }
    }
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Appended {
    /// The entry (the first one, when the admission key was seen before).
    pub entry: Entry,
    /// The checkpoint taken before it.
    pub checkpoint: Option<Checkpoint>,
    /// A checkpoint was due and failed: the entry was saved without one.
    pub checkpoint_error: Option<CheckpointFailure>,
    /// The admission key was seen before: this is the first entry, and nothing was written.
    pub repeated: bool,
}

/// A checkpoint that failed; the conversation went on without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CheckpointFailure {
    /// The error's kind.
    pub kind: ErrorKind,
    /// Its message.
    pub message: String,
}

/// How to append an entry.
#[derive(Clone, Default)]
pub struct AppendOptions {
    /// The run appending: its workspace and policy decide the checkpoint.
    pub run: Option<Run>,
    /// Without a run: a workspace to checkpoint with the runtime's policy.
    pub workspace: Option<Arc<dyn Files>>,
    /// An admission key: appending with a key seen before returns the first entry and takes
    /// no second checkpoint.
    pub key: Option<String>,
    /// How long to wait for another append of the same key that is being admitted. Default
    /// (zero) means 30 s.
    pub wait: Duration,
    /// Record the entry with the files of this checkpoint (a new checkpoint of the same
    /// snapshot) instead of taking one: a prompt that an agent's own rewind moved keeps the
    /// files it was sent with (issue 54).
    pub files_of: Option<CheckpointId>,
}

impl std::fmt::Debug for AppendOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendOptions")
            .field("run", &self.run.as_ref().map(|r| r.id()))
            .field("workspace", &self.workspace.as_ref().map(|w| w.id()))
            .field("key", &self.key)
            .field("wait", &self.wait)
            .field("files_of", &self.files_of)
            .finish()
    }
}

/// How to take a manual checkpoint: the workspace of `run`, else `workspace`.
#[derive(Clone, Default)]
pub struct CheckpointOptions {
    /// The run whose workspace and policy to use.
    pub run: Option<Run>,
    /// Without a run: the workspace, with the runtime's policy.
    pub workspace: Option<Arc<dyn Files>>,
    /// What the caller knows of the point, kept in the snapshot's manifest (an agent's hook:
    /// `tool_use_id`, `tool_name`, `agent_id`); `cairn_*` keys are Cairn's own and not taken.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for CheckpointOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointOptions")
            .field("run", &self.run.as_ref().map(|r| r.id()))
            .field("workspace", &self.workspace.as_ref().map(|w| w.id()))
            .field("metadata", &self.metadata)
            .finish()
    }
}

/// A registered operation of this handle: while it lives, records and holds naming it are
/// alive; dropping it (also by unwinding) releases its holds.
pub(crate) struct OpGuard<'a> {
    inner: &'a Inner,
    pub(crate) op: String,
    _lock: Option<crate::db::OpLock>,
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        let _ = self.inner.write("release an operation's holds", |c| {
            c.execute("DELETE FROM holds WHERE op = ?1", [&self.op])
                .db("release an operation's holds")
        });
        if let Backend::Pg(pg) = &mut *self.inner.conn.lock() {
            let _ = pg.query(
                "SELECT pg_advisory_unlock(?1)",
                [crate::db::op_key(&self.op)],
            );
        }
        self.inner.ops.lock().remove(&self.op);
    }
}

/// Runs `f` in a PostgreSQL transaction begun by `begin`: committed when `f` succeeds, rolled
/// back otherwise.
fn pg_transaction<T>(
    pg: &mut PgClient,
    action: &'static str,
    begin: &str,
    write: bool,
    f: impl FnOnce(&Conn<'_>) -> Result<T>,
) -> Result<T> {
    pg.begin(begin).db(action)?;
    let out = (|| {
        if write {
            // One writer at a time, as SQLite's BEGIN IMMEDIATE: every write transaction
            // takes this lock first, so each sees every write committed before it.
            pg.query(
                "SELECT pg_advisory_xact_lock(?1)::text",
                [db::lock_key("write")],
            )
            .db(action)?;
        }
        let conn = Conn::Pg(RefCell::new(&mut *pg));
        f(&conn)
    })();
    match out {
        Ok(v) => {
            pg.end("COMMIT").db(action)?;
            Ok(v)
        }
        Err(e) => {
            let _ = pg.end("ROLLBACK");
            Err(e)
        }
    }
}

impl Inner {
    /// Runs `f` in an immediate (write) transaction; an error rolls it back.
    pub(crate) fn write<T>(
        &self,
        action: &'static str,
        f: impl FnOnce(&Conn<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut backend = self.conn.lock();
        let out = match &mut *backend {
            Backend::Sqlite(conn) => (|| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .db(action)?;
                let out = f(&Conn::Sqlite(&tx))?;
                tx.commit().db(action)?;
                Ok(out)
            })(),
            Backend::Pg(pg) => pg_transaction(pg, action, "BEGIN", true, f),
        };
        out.map_err(|e| e.at(&self.path))
    }

    /// Runs `f` in a read transaction (one consistent view).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<T> {
        let mut backend = self.conn.lock();
        let out = match &mut *backend {
            Backend::Sqlite(conn) => (|| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Deferred)
                    .db("read")?;
                f(&Conn::Sqlite(&tx))
            })(),
            Backend::Pg(pg) => pg_transaction(
                pg,
                "read",
                "BEGIN ISOLATION LEVEL REPEATABLE READ",
                false,
                f,
            ),
        };
        out.map_err(|e| e.at(&self.path))
    }

    /// Registers an operation of this handle.
    pub(crate) fn begin_op(&self, op: String) -> Result<OpGuard<'_>> {
        let lock = self.holder.lock_op(&op)?;
        if let Backend::Pg(pg) = &mut *self.conn.lock() {
            pg.query("SELECT pg_advisory_lock(?1)::text", [db::op_key(&op)])
                .db("register an operation")
                .map_err(|e| e.at(&self.path))?;
        }
        self.ops.lock().insert(op.clone());
        Ok(OpGuard {
            inner: self,
            op,
            _lock: lock,
        })
    }

    /// Whether the operation `op` of `holder` is still going: for this handle, while its guard
    /// lives; for another, while its operation file is locked.
    pub(crate) fn op_alive(&self, c: &Conn<'_>, holder: &str, op: &str) -> bool {
        if holder == self.holder.id() {
            self.ops.lock().contains(op)
        } else {
            self.holder.op_alive(c, op)
        }
    }

    /// [`Inner::op_alive`] outside a transaction. Errors count as alive.
    pub(crate) fn op_alive_now(&self, holder: &str, op: &str) -> bool {
        self.read(|c| Ok(self.op_alive(c, holder, op)))
            .unwrap_or(true)
    }

    pub(crate) fn holder_id(&self) -> &str {
        self.holder.id()
    }
}

/// The root a workspace is recorded and compared under: canonical when it resolves.
pub(crate) fn canonical_root(ws: &dyn Files) -> PathBuf {
    std::fs::canonicalize(ws.root()).unwrap_or_else(|_| ws.root().to_path_buf())
}

impl Threads {
    /// Opens (creating if needed) the thread database at `path`: an SQLite file, or a
    /// PostgreSQL database when `path` is a `postgres://` or `postgresql://` URL (see
    /// [`Threads::open_url`]). With [`ThreadsOptions::recover`], rewinds a crash interrupted
    /// are finished or failed first.
    pub fn open(path: impl AsRef<Path>, options: ThreadsOptions) -> Result<Threads> {
        if let Some(url) = path.as_ref().to_str().filter(|p| db::is_pg_url(p)) {
            return Threads::open_url(url, options);
        }
        let path = path.as_ref().to_path_buf();
        // SQLite follows symlinks: one planted as the database (or its journal, its shared
        // memory, its holders file) would make it create or overwrite a file anywhere
        // (issue 34). Refused, naming it.
        for suffix in ["", "-wal", "-shm", "-journal", "-holders"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let p = PathBuf::from(p);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::Corrupt {
                    what: "a file of the database".into(),
                    path: p,
                    detail: "it is a symlink, and the thread database is never opened through \
                             one: remove the link (and put the real file there if it was moved)"
                        .into(),
                });
            }
        }
        // A file that exists and is empty was a database someone truncated (or a first open
        // cut before its schema was written): taking it as a new database would lose every
        // thread without a word (issue 34).
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(Error::Corrupt {
                what: "the database file".into(),
                path,
                detail: "it is empty (0 bytes), so every thread it held is gone; restore it \
                         from a copy, or remove it to start a new thread database"
                    .into(),
            });
        }
        let conn = db::open(&path, options.busy_timeout)?;
        let mut holders = path.clone().into_os_string();
        holders.push("-holders");
        let holder = Holder::register(Path::new(&holders))?;
        Threads::with_backend(path, Backend::Sqlite(conn), holder, options)
    }

    /// Opens the thread database at a PostgreSQL URL
    /// (`postgres://user:password@host:port/database`, or any form the `postgres` crate
    /// accepts), creating the schema in a database without it. Several processes on several
    /// machines may share it: writes are serialized by one advisory lock (as SQLite's
    /// `BEGIN IMMEDIATE` does), and each handle's liveness is an advisory lock of its session.
    ///
    /// A host that does not answer fails after 5 s (unless the URL sets `connect_timeout`);
    /// errors name the URL without its password. TLS is not supported: use a trusted network
    /// or a tunnel.
    pub fn open_url(url: &str, options: ThreadsOptions) -> Result<Threads> {
        if !db::is_pg_url(url) {
            return Err(Error::InvalidArgument(format!(
                "{} is not a PostgreSQL URL; it must start with postgres:// or postgresql://",
                db::redact_url(url)
            )));
        }
        let path = PathBuf::from(db::redact_url(url));
        let mut pg = db::open_pg(url, &path, options.busy_timeout)?;
        let holder = Holder::register_pg(&mut pg).map_err(|e| e.at(&path))?;
        Threads::with_backend(path, Backend::Pg(Box::new(pg)), holder, options)
    }

    fn with_backend(
        path: PathBuf,
        conn: Backend,
        holder: Holder,
        options: ThreadsOptions,
    ) -> Result<Threads> {
        let threads = Threads {
            inner: Arc::new(Inner {
                path,
                conn: Mutex::new(conn),
                holder,
                options,
                runs: Mutex::new(HashMap::new()),
                ops: Mutex::new(HashSet::new()),
            }),
        };
        if threads.inner.options.recover {
            let workspaces = threads.inner.options.workspaces.clone();
            threads.recover(&workspaces)?;
        }
        Ok(threads)
    }

    /// Opens the database of a store: `<store>/threads.db`.
    pub fn open_in_store(store_dir: impl AsRef<Path>, options: ThreadsOptions) -> Result<Threads> {
        Threads::open(store_dir.as_ref().join(DB_FILE), options)
    }

    /// The database file, or for PostgreSQL the URL without its password.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options it was opened with.
    pub fn options(&self) -> &ThreadsOptions {
        &self.inner.options
    }

    /// Creates a thread, with `id` or a new one. An id that names a thread already is refused
    /// with `VALIDATION`.
    pub fn create_thread(
        &self,
        id: Option<ThreadId>,
        metadata: serde_json::Value,
    ) -> Result<Thread> {
        let id = match id {
            Some(id) => {
                id.check()?;
                id
            }
            None => ThreadId::generate(),
        };
        check_object(&metadata, "thread metadata")?;
        self.inner.write("create a thread", |c| {
            crate::names::check_id_free(c, &id)?;
            c.execute(
                "INSERT INTO threads (id, created_ms, metadata) VALUES (?1, ?2, ?3)",
                params![id, c.now_ms(), metadata.to_string()],
            )
            .db("create a thread")?;
            emit(
                c,
                Some(&id),
                EventKind::ThreadCreated,
                serde_json::json!({}),
            )?;
            require_thread(c, &id)
        })
    }

    /// A thread.
    pub fn thread(&self, id: &ThreadId) -> Result<Thread> {
        self.inner.read(|c| require_thread(c, id))
    }

    /// Every thread, oldest first.
    pub fn threads(&self) -> Result<Vec<Thread>> {
        self.inner.read(|c| {
            let ids: Vec<ThreadId> = c
                .prepare("SELECT id FROM threads WHERE state = 'ready' ORDER BY created_ms, rowid")
                .db("list threads")?
                .query_map((), |r| r.get(0))
                .db("list threads")?
                .collect::<crate::sql::SqlResult<_>>()
                .db("list threads")?;
            ids.iter().map(|id| require_thread(c, id)).collect()
        })
    }

    /// An entry, saying whether it is on its thread's active branch.
    pub fn entry(&self, id: &EntryId) -> Result<Entry> {
        self.inner.read(|c| {
            let mut e = load_entry(c, id)?.ok_or_else(|| {
                Error::not_found(
                    format!("entry {id}"),
                    "list a thread's entries with entries()",
                )
            })?;
            let t = require_thread(c, &e.thread_id)?;
            e.on_active_branch = active_entries(c, t.active_leaf.as_ref())?
                .iter()
                .any(|a| a.id == e.id);
            Ok(e)
        })
    }

    /// The active branch of a thread, from its first entry to its active leaf.
    pub fn active_branch(&self, thread: &ThreadId) -> Result<Vec<Entry>> {
        self.inner.read(|c| {
            let t = require_thread(c, thread)?;
            let mut out = active_entries(c, t.active_leaf.as_ref())?;
            for e in &mut out {
                e.on_active_branch = true;
            }
            Ok(out)
        })
    }

    /// The entries of a thread in the order they were written: the active branch, or with
    /// `all` every entry the thread sees (its shared prefix, its own entries on every branch;
    /// `log --all`). Each says whether it is on the active branch.
    pub fn entries(&self, thread: &ThreadId, all: bool) -> Result<Vec<Entry>> {
        if !all {
            return self.active_branch(thread);
        }
        self.inner.read(|c| {
            let t = require_thread(c, thread)?;
            let active: HashSet<EntryId> = active_entries(c, t.active_leaf.as_ref())?
                .into_iter()
                .map(|e| e.id)
                .collect();
            let mut out = lineage_entries(c, &t)?;
            for e in &mut out {
                e.on_active_branch = active.contains(&e.id);
            }
            Ok(out)
        })
    }

    /// The branches of a thread: every leaf among the entries it sees, the active one marked.
    pub fn branches(&self, thread: &ThreadId) -> Result<Vec<Branch>> {
        let all = self.entries(thread, true)?;
        let t = self.thread(thread)?;
        let ids: HashSet<&EntryId> = all.iter().map(|e| &e.id).collect();
        let parents: HashMap<&EntryId, Option<&EntryId>> =
            all.iter().map(|e| (&e.id, e.parent_id.as_ref())).collect();
        let with_children: HashSet<&EntryId> =
            all.iter().filter_map(|e| e.parent_id.as_ref()).collect();
        let mut out = Vec::new();
        for e in &all {
            let is_active = t.active_leaf.as_ref() == Some(&e.id);
            if with_children.contains(&e.id) && !is_active {
                continue;
            }
            let mut length = 0;
            let mut cur = Some(&e.id);
            while let Some(id) = cur {
                if !ids.contains(id) {
                    break;
                }
                length += 1;
                cur = parents.get(id).copied().flatten();
            }
            out.push(Branch {
                leaf: e.id.clone(),
                length,
                active: is_active,
            });
        }
        Ok(out)
    }

    /// Live holds (of rewinds and forks in flight) on `thread` or on a workspace overlapping
    /// `root`, other than `except`'s.
    pub(crate) fn live_holds(
        &self,
        c: &Conn<'_>,
        thread: Option<&ThreadId>,
        root: Option<&Path>,
        except: Option<&str>,
    ) -> Result<Vec<HoldRow>> {
        let rows: Vec<(HoldRow, String)> = c
            .prepare("SELECT thread_id, workspace_id, root, op, holder FROM holds")
            .db("read holds")?
            .query_map((), |r| {
                let hold = HoldRow {
                    thread_id: r.get(0)?,
                    workspace_id: r.get(1)?,
                    root: r.get::<_, Option<Vec<u8>>>(2)?.map(root_path),
                    op: r.get(3)?,
                };
                Ok((hold, r.get(4)?))
            })
            .db("read holds")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read holds")?;
        let mut out = Vec::new();
        for (hold, holder) in rows {
            if Some(hold.op.as_str()) == except {
                continue;
            }
            let hits_thread = thread.is_some() && hold.thread_id.as_ref() == thread;
            let hits_ws = match (root, &hold.root) {
                (Some(a), Some(b)) => crate::model::roots_overlap(a, b),
                _ => false,
            };
            if (hits_thread || hits_ws) && self.inner.op_alive(c, &holder, &hold.op) {
                out.push(hold);
            }
        }
        Ok(out)
    }

    /// Refuses with `THREAD_BUSY` while a rewind or fork holds the thread, or a rewind a
    /// crash interrupted waits to be finished.
    pub(crate) fn check_not_held(&self, c: &Conn<'_>, thread: &ThreadId) -> Result<()> {
        if let Some(h) = self.live_holds(c, Some(thread), None, None)?.first() {
            return Err(Error::ThreadBusy {
                thread: thread.clone(),
                detail: format!("{} holds it; try again when it is done", describe_op(&h.op)),
            });
        }
        let pending: Vec<(String, String, String)> = c
            .prepare(
                "SELECT id, holder, op FROM rewinds WHERE thread_id = ?1 AND state IN ('started', 'files_done')",
            )
            .db("read rewind records")?
            .query_map([thread], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .db("read rewind records")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read rewind records")?;
        for (id, holder, op) in pending {
            if !self.inner.op_alive(c, &holder, &op) {
                return Err(Error::ThreadBusy {
                    thread: thread.clone(),
                    detail: format!(
                        "rewind {id} was interrupted by a crash while it restored files; finish it by opening the \
                         database with its workspace (ThreadsOptions::workspaces) or calling recover(), or rewind \
                         the thread again"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Finishes what a crash interrupted on `thread` when it can be (with `workspace`, if
    /// given), before new work starts there.
    pub(crate) fn settle_thread(
        &self,
        thread: &ThreadId,
        workspace: Option<&dyn Files>,
    ) -> Result<()> {
        let list: Vec<&dyn Files> = workspace.into_iter().collect();
        self.recover_where(Some(thread), &list).map(|_| ())
    }
}

pub(crate) fn describe_op(op: &str) -> String {
    match op.split_once(':') {
        Some(("rewind", id)) => format!("rewind {id}"),
        Some(("fork", id)) => format!("fork {id}"),
        _ => op.to_string(),
    }
}

pub(crate) fn thread_exists_error(id: &ThreadId) -> Error {
    Error::validation(
        format!("a thread named {id} exists already; choose another id, or leave it to Cairn"),
        Some(id.to_string()),
    )
}
