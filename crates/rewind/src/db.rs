//! The SQLite database: opening (WAL, `busy_timeout`, foreign keys), the versioned schema, and
//! the holder files that tell a live process's work from a crashed one's.

use crate::error::{DbResult, Error, Result};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this build writes and reads (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// The whole schema of version 1, created in one transaction.
const SCHEMA_V1: &str = r#"
CREATE TABLE threads (
  id TEXT PRIMARY KEY,
  created_ms INTEGER NOT NULL,
  state TEXT NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'pending')),
  parent_thread TEXT REFERENCES threads(id),
  fork_entry TEXT REFERENCES entries(id),
  file_checkpoint_at TEXT REFERENCES checkpoints(id),
  fork_checkpoint_seq INTEGER,
  active_leaf TEXT REFERENCES entries(id),
  metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE checkpoints (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  entry_id TEXT,
  kind TEXT NOT NULL CHECK (kind IN ('user', 'tool', 'compaction', 'manual')),
  label TEXT,
  snapshot_id TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  root BLOB NOT NULL,
  run_id TEXT,
  created_ms INTEGER NOT NULL
);
CREATE INDEX checkpoints_thread ON checkpoints(thread_id, seq);
CREATE INDEX checkpoints_entry ON checkpoints(entry_id);
CREATE TABLE entries (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  parent_id TEXT REFERENCES entries(id),
  kind TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool', 'note', 'event', 'compaction')),
  payload BLOB NOT NULL,
  metadata TEXT NOT NULL,
  checkpoint_id TEXT REFERENCES checkpoints(id),
  run_id TEXT,
  key TEXT,
  created_ms INTEGER NOT NULL
);
CREATE INDEX entries_parent ON entries(parent_id);
CREATE INDEX entries_thread ON entries(thread_id, seq);
CREATE TABLE thread_workspaces (
  thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  workspace_id TEXT NOT NULL,
  root BLOB NOT NULL,
  first_ms INTEGER NOT NULL,
  PRIMARY KEY (thread_id, workspace_id, root)
);
CREATE TABLE admissions (
  thread_id TEXT NOT NULL REFERENCES threads(id),
  key TEXT NOT NULL,
  entry_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'done')),
  holder TEXT NOT NULL,
  op TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (thread_id, key)
);
CREATE TABLE memory_items (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  kind TEXT NOT NULL CHECK (kind IN ('item', 'summary')),
  text TEXT NOT NULL,
  payload BLOB NOT NULL,
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'stale')),
  stale_reason TEXT,
  stale_rewind TEXT,
  created_ms INTEGER NOT NULL
);
CREATE INDEX memory_thread ON memory_items(thread_id, seq);
CREATE TABLE memory_entries (
  item_id TEXT NOT NULL REFERENCES memory_items(id),
  entry_id TEXT NOT NULL REFERENCES entries(id),
  PRIMARY KEY (item_id, entry_id)
);
CREATE INDEX memory_entries_entry ON memory_entries(entry_id);
CREATE TABLE runs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  workspace_id TEXT,
  root BLOB,
  durable INTEGER NOT NULL,
  parent_run TEXT,
  policy TEXT NOT NULL DEFAULT '{}',
  holder TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running', 'paused', 'ended', 'interrupted', 'dropped')),
  lease_ms INTEGER NOT NULL,
  lease_expires_ms INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  end_reason TEXT
);
CREATE INDEX runs_thread ON runs(thread_id, status);
CREATE INDEX runs_status ON runs(status);
CREATE TABLE tool_calls (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  run_id TEXT NOT NULL REFERENCES runs(id),
  name TEXT NOT NULL,
  workspace_id TEXT,
  root BLOB,
  started_ms INTEGER NOT NULL,
  finished_ms INTEGER,
  lease_expires_ms INTEGER NOT NULL
);
CREATE INDEX tool_calls_open ON tool_calls(finished_ms);
CREATE TABLE rewinds (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  key TEXT,
  state TEXT NOT NULL CHECK (state IN ('started', 'files_done', 'completed', 'failed')),
  holder TEXT NOT NULL,
  op TEXT NOT NULL,
  request TEXT NOT NULL,
  files TEXT,
  report TEXT,
  error TEXT,
  created_ms INTEGER NOT NULL,
  finished_ms INTEGER,
  UNIQUE (thread_id, key)
);
CREATE INDEX rewinds_state ON rewinds(state, thread_id);
CREATE TABLE forks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  fork_thread TEXT NOT NULL,
  at_entry TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('started', 'completed', 'failed')),
  holder TEXT NOT NULL,
  op TEXT NOT NULL,
  copied TEXT NOT NULL DEFAULT '[]',
  workspace_id TEXT,
  root BLOB,
  report TEXT,
  error TEXT,
  created_ms INTEGER NOT NULL,
  finished_ms INTEGER
);
CREATE INDEX forks_state ON forks(state);
CREATE TABLE holds (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT,
  workspace_id TEXT,
  root BLOB,
  op TEXT NOT NULL,
  holder TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT,
  kind TEXT NOT NULL,
  data TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX events_thread ON events(thread_id, seq);
"#;

/// Opens (creating if needed) the database at `path`: WAL mode, `busy_timeout`, foreign keys on,
/// `synchronous = FULL`, and the schema created or checked in one transaction.
pub(crate) fn open(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let inner = || -> Result<Connection> {
        let mut conn = Connection::open_with_flags(path, flags).db("open")?;
        conn.busy_timeout(busy_timeout).db("set busy_timeout")?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .db("switch to WAL mode")?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::InvalidArgument(format!(
                "the thread database {} cannot use WAL mode (it is in '{mode}' mode); put it on a local file system",
                path.display()
            )));
        }
        conn.pragma_update(None, "foreign_keys", true)
            .db("turn foreign keys on")?;
        conn.pragma_update(None, "synchronous", "FULL")
            .db("set synchronous")?;
        migrate(&mut conn, path)?;
        Ok(conn)
    };
    inner().map_err(|e| e.at(path))
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .db("begin the schema transaction")?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .db("read the schema version")?;
    match version {
        0 => {
            tx.execute_batch(SCHEMA_V1).db("create the schema")?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .db("write the schema version")?;
        }
        SCHEMA_VERSION => {}
        found => {
            return Err(Error::UnsupportedSchema {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            })
        }
    }
    tx.commit().db("commit the schema")
}

/// This process's (this handle's) holder file: an `flock`ed file named by a random id, held for
/// the handle's life. Work recorded with a holder id whose file can be locked (or is gone)
/// belongs to a handle that is gone: a crash never leaves a stale hold.
#[derive(Debug)]
pub(crate) struct Holder {
    id: String,
    dir: PathBuf,
    path: PathBuf,
    file: Option<File>,
}

impl Holder {
    /// Registers a new holder in `dir` (created owner-only).
    pub(crate) fn register(dir: &Path) -> Result<Holder> {
        cairn_store::fsutil::ensure_dir(dir)?;
        let id = format!("h{}", crate::ids::fresh_hex());
        let path = dir.join(format!("{id}.lock"));
        let file = lock_fresh(&path, "lock a new holder file")?;
        Ok(Holder {
            id,
            dir: dir.to_path_buf(),
            path,
            file: Some(file),
        })
    }

    /// This holder's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Whether the holder `other` is alive (its file exists and is locked). Errors count as
    /// alive: never take over work that may still be going.
    pub(crate) fn is_alive(&self, other: &str) -> bool {
        if other == self.id {
            return true;
        }
        if !other.starts_with('h') || !other[1..].bytes().all(|b| b.is_ascii_hexdigit()) {
            return false;
        }
        locked(&self.dir.join(format!("{other}.lock")))
    }

    /// Registers an operation (a rewind, a fork, an admission): an `flock`ed file held while
    /// it works, so any process can tell it from one a crash or a panic stopped.
    pub(crate) fn lock_op(&self, op: &str) -> Result<OpLock> {
        let path = self
            .op_path(op)
            .ok_or_else(|| Error::InvalidArgument(format!("'{op}' cannot name an operation")))?;
        let file = lock_fresh(&path, "lock an operation file")?;
        Ok(OpLock {
            path,
            file: Some(file),
        })
    }

    /// Whether the operation `op` is still going (its file is locked).
    pub(crate) fn op_alive(&self, op: &str) -> bool {
        self.op_path(op).is_some_and(|p| locked(&p))
    }

    fn op_path(&self, op: &str) -> Option<PathBuf> {
        let ok = !op.is_empty()
            && op.len() <= 100
            && op
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b':');
        ok.then(|| self.dir.join(format!("op-{}.lock", op.replace(':', "-"))))
    }
}

/// A held operation file; dropping it removes the file and releases the lock.
#[derive(Debug)]
pub(crate) struct OpLock {
    path: PathBuf,
    file: Option<File>,
}

impl Drop for OpLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

/// Opens (creating) the lock file at `path` and takes its lock, which nobody else may hold.
fn lock_fresh(path: &Path, action: &'static str) -> Result<File> {
    let file = cairn_store::fsutil::open_lock_file(path)?;
    if !cairn_store::fsutil::flock(&file, cairn_store::fsutil::LockMode::Exclusive, false, path)? {
        return Err(Error::Io {
            action,
            path: path.to_path_buf(),
            source: std::io::Error::other("someone else holds this lock file"),
        });
    }
    Ok(file)
}

/// Whether the lock file at `path` is held by someone. A file whose lock can be taken
/// belongs to a process that is gone: it is removed. Errors count as held.
fn locked(path: &Path) -> bool {
    let file = match open_existing(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    match cairn_store::fsutil::flock(&file, cairn_store::fsutil::LockMode::Exclusive, false, path) {
        Ok(true) => {
            // Its owner is gone: remove the file while we hold its lock.
            let _ = std::fs::remove_file(path);
            false
        }
        Ok(false) => true,
        Err(_) => true,
    }
}

fn open_existing(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

impl Drop for Holder {
    fn drop(&mut self) {
        // Unlink while the lock is held, then close (which releases it).
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}
