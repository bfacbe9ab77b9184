//! The thread database: opening SQLite (WAL, `busy_timeout`, foreign keys) or PostgreSQL (a
//! `postgres://` URL), the versioned schema, and the holders that tell a live process's work
//! from a crashed one's: `flock`ed files beside an SQLite file, session advisory locks on
//! PostgreSQL.

use crate::error::{DbResult, Error, Result};
use crate::sql::{Conn, PgClient};
use cairn_store::fsutil::{HeldLock, LockMode};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this build writes and reads (`PRAGMA user_version`).
///
/// Version 2 has version 1's tables and adds an event kind (`restore_applied`): a build of
/// version 1 would fail on reading it from the shared log, so it is refused the database
/// (`UNSUPPORTED`, naming both versions) instead. Version 3 adds the table `thread_names`
/// (the names a rewind's continuation gives a thread, issue 54), which a build of version 2
/// would not keep. Opening a version 1 or 2 database upgrades it in place (nothing to
/// rewrite: the new table is created and the version changes). Version 4 adds the table
/// `inbox` (prompts queued for a thread's next safe boundary, issue 59) and its event kinds
/// (`prompt_queued`, `prompt_delivered`, `prompt_cancelled`), which a build of version 3 would
/// fail on reading from the shared log; a version 1 to 3 database gains the table in place.
pub const SCHEMA_VERSION: i64 = 4;

/// What version 4 adds: the inbox of each thread (see [`crate::Admission`]). One row per
/// admission key of a thread, for ever: `queued` until delivered at a safe boundary (the
/// entry and its checkpoint named) or cancelled by a rewind (named). Written to run on a
/// database that may have it already.
const SCHEMA_V4: &str = r#"
CREATE TABLE IF NOT EXISTS inbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  key TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'delivered', 'cancelled')),
  payload BLOB NOT NULL,
  metadata TEXT NOT NULL,
  entry_id TEXT,
  checkpoint_id TEXT,
  rewind_id TEXT,
  error TEXT,
  queued_ms INTEGER NOT NULL,
  done_ms INTEGER,
  UNIQUE (thread_id, key)
);
CREATE INDEX IF NOT EXISTS inbox_queued ON inbox(thread_id, state, seq);
"#;

/// What version 3 adds to the tables of versions 1 and 2: the names a thread is also found by
/// (see [`crate::names`]). Written to run on a database that may have it already.
const SCHEMA_V3: &str = r#"
CREATE TABLE IF NOT EXISTS thread_names (
  name TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL REFERENCES threads(id),
  created_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS thread_names_thread ON thread_names(thread_id);
"#;

/// The tables of schema versions 1 and 2 (version 3 adds [`SCHEMA_V3`], version 4
/// [`SCHEMA_V4`]), created in one transaction.
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

/// How long a PostgreSQL connection may take to be made, unless the URL says
/// (`connect_timeout`).
const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An open database of either engine.
pub(crate) enum Backend {
    /// An SQLite file.
    Sqlite(Connection),
    /// A PostgreSQL session.
    Pg(Box<PgClient>),
}

/// Whether `location` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_pg_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `url` without its password (in the user part or as a `password=` parameter), fit for
/// messages.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// A 64-bit advisory lock key for `name`, the same in every process.
pub(crate) fn lock_key(name: &str) -> i64 {
    let digest = Sha256::digest(format!("cairn-threads:{name}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// Connects to the PostgreSQL database at `url` and creates or checks the schema. `shown` is
/// the URL without its password, for messages. Waiting for another connection's write lock
/// fails with `BUSY` after `busy_timeout`.
pub(crate) fn open_pg(url: &str, shown: &Path, busy_timeout: Duration) -> Result<PgClient> {
    let inner = || -> Result<PgClient> {
        let mut config: postgres::Config = url.parse().map_err(|e| {
            Error::InvalidArgument(format!(
                "{} is not a PostgreSQL URL this build understands: {e}",
                shown.display()
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(PG_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("cairn");
        }
        // A machine that vanishes must not hold its locks for hours: the client probes an
        // idle connection after 10 s, and so does the server (below).
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(10));
        // `connect_timeout` bounds the TCP connection only; a server that accepts and never
        // answers would hold the handshake for ever. The handshake runs on a helper thread,
        // abandoned (with its socket) if it has not finished in time.
        let limit = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(PG_CONNECT_TIMEOUT);
        let (sent, got) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("cairn-pg-connect".into())
            .spawn(move || {
                let _ = sent.send(config.connect(postgres::NoTls));
            })
            .map_err(|source| Error::Io {
                action: "start a thread to connect to PostgreSQL",
                path: shown.to_path_buf(),
                source,
            })?;
        let client = match got.recv_timeout(limit + Duration::from_millis(500)) {
            Ok(connected) => connected.map_err(crate::error::DbError::from),
            Err(_) => Err(crate::error::DbError::NoAnswer(limit)),
        }
        .map_err(|source| Error::Connect {
            url: shown.to_path_buf(),
            source,
        })?;
        let mut pg = PgClient::new(client);
        let timeout_ms = busy_timeout.as_millis().max(1);
        pg.batch(&format!(
            "SET lock_timeout = {timeout_ms}; SET tcp_keepalives_idle = 10; \
             SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3"
        ))
        .db("set up the PostgreSQL session")?;
        migrate_pg(&mut pg, shown)?;
        pg.clock_offset_ms = clock_offset(&mut pg).db("read the server's clock")?;
        Ok(pg)
    };
    inner().map_err(|e| e.at(shown))
}

/// The server's clock minus this machine's, in milliseconds (to within half a round trip):
/// leases and times are written by the server's clock, whatever each machine's says.
fn clock_offset(pg: &mut PgClient) -> crate::sql::SqlResult<i64> {
    let before = cairn_store::fsutil::now_ms();
    let server: i64 = pg
        .query(
            "SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)",
            (),
        )?
        .first()
        .ok_or(crate::error::DbError::NoRows)?
        .get(0)?;
    let after = cairn_store::fsutil::now_ms();
    Ok(server - (before + after) / 2)
}

/// Creates (under an advisory lock, so two first opens do not race) or checks the schema.
fn migrate_pg(pg: &mut PgClient, shown: &Path) -> Result<()> {
    pg.batch("BEGIN").db("begin the schema transaction")?;
    let out = (|| -> Result<()> {
        pg.query(
            "SELECT pg_advisory_xact_lock(?1)::text",
            [lock_key("schema")],
        )
        .db("lock the schema")?;
        let exists: bool = pg
            .query("SELECT to_regclass('cairn_schema') IS NOT NULL", ())
            .db("read the schema version")?
            .first()
            .map(|r| r.get(0))
            .transpose()
            .db("read the schema version")?
            .unwrap_or(false);
        let version: i64 = if exists {
            pg.query("SELECT version FROM cairn_schema", ())
                .db("read the schema version")?
                .first()
                .map(|r| r.get(0))
                .transpose()
                .db("read the schema version")?
                .unwrap_or(0)
        } else {
            0
        };
        match version {
            0 => {
                pg.batch(&pg_schema()).db("create the schema")?;
                pg.query(
                    "INSERT INTO cairn_schema (version) VALUES (?1) RETURNING version",
                    [SCHEMA_VERSION],
                )
                .db("write the schema version")?;
                Ok(())
            }
            // Version 1's tables are version 2's; versions 3 and 4 add one each.
            1..=3 => {
                pg.batch(&pg_types(SCHEMA_V3)).db("upgrade the schema")?;
                pg.batch(&pg_types(SCHEMA_V4)).db("upgrade the schema")?;
                pg.query(
                    "UPDATE cairn_schema SET version = ?1 RETURNING version",
                    [SCHEMA_VERSION],
                )
                .db("upgrade the schema version")?;
                Ok(())
            }
            SCHEMA_VERSION => Ok(()),
            found => Err(Error::UnsupportedSchema {
                path: shown.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            }),
        }
    })();
    match out {
        Ok(()) => pg.batch("COMMIT").db("commit the schema"),
        Err(e) => {
            let _ = pg.batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The schema for PostgreSQL: [`SCHEMA_V1`], [`SCHEMA_V3`] and [`SCHEMA_V4`] with their types
/// translated ([`pg_types`]), the three references of `threads` to tables created after it added at the end, an explicit `rowid` on `threads`
/// (SQLite's implicit one orders threads created in the same millisecond), and the
/// `cairn_schema` table that holds what SQLite keeps in `PRAGMA user_version`.
pub(crate) fn pg_schema() -> String {
    let forward = [
        (
            "fork_entry TEXT REFERENCES entries(id)",
            "fork_entry",
            "entries",
        ),
        (
            "file_checkpoint_at TEXT REFERENCES checkpoints(id)",
            "file_checkpoint_at",
            "checkpoints",
        ),
        (
            "active_leaf TEXT REFERENCES entries(id)",
            "active_leaf",
            "entries",
        ),
    ];
    let mut schema = pg_types(SCHEMA_V1);
    for (column, name, table) in forward {
        schema = schema.replace(column, &format!("{name} TEXT"));
        schema.push_str(&format!(
            "ALTER TABLE threads ADD FOREIGN KEY ({name}) REFERENCES {table}(id);\n"
        ));
    }
    schema.push_str(
        "ALTER TABLE threads ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;\n\
         CREATE TABLE cairn_schema (version BIGINT NOT NULL);\n",
    );
    schema.push_str(&pg_types(SCHEMA_V3));
    schema.push_str(&pg_types(SCHEMA_V4));
    schema
}

/// SQLite's column types in `sql` translated for PostgreSQL: BIGINT for INTEGER, BYTEA for
/// BLOB, identity columns for AUTOINCREMENT.
fn pg_types(sql: &str) -> String {
    sql.replace(
        "INTEGER PRIMARY KEY AUTOINCREMENT",
        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    )
    .replace("INTEGER", "BIGINT")
    .replace("BLOB", "BYTEA")
}

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
            tx.execute_batch(SCHEMA_V3).db("create the schema")?;
            tx.execute_batch(SCHEMA_V4).db("create the schema")?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .db("write the schema version")?;
        }
        // Version 1's tables are version 2's; versions 3 and 4 add one each.
        1..=3 => {
            tx.execute_batch(SCHEMA_V3).db("upgrade the schema")?;
            tx.execute_batch(SCHEMA_V4).db("upgrade the schema")?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .db("upgrade the schema version")?;
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

/// This handle's holder: work recorded under a holder id that is not alive belongs to a handle
/// that is gone, so a crash never leaves a stale hold.
///
/// Beside an SQLite file, a holder (and each operation) is an `flock`ed file named by a random
/// id, held for the handle's life. On PostgreSQL it is a session advisory lock of the handle's
/// connection, keyed by the id: the server releases it when the session ends, whichever
/// machine the process ran on.
#[derive(Debug)]
pub(crate) enum Holder {
    /// Lock files in a directory beside the database file.
    Files(FileHolder),
    /// Session advisory locks of the handle's PostgreSQL connection.
    Pg {
        /// The holder's id.
        id: String,
    },
}

/// A holder of lock files.
#[derive(Debug)]
pub(crate) struct FileHolder {
    id: String,
    dir: PathBuf,
    path: PathBuf,
    file: Option<HeldLock>,
}

fn fresh_holder_id() -> String {
    format!("h{}", crate::ids::fresh_hex())
}

/// Whether `id` has the form of a holder id.
fn holder_id_ok(id: &str) -> bool {
    id.starts_with('h') && id[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `op` may name an operation.
fn op_ok(op: &str) -> bool {
    !op.is_empty()
        && op.len() <= 100
        && op
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b':')
}

/// The advisory lock key of the holder `id`.
pub(crate) fn holder_key(id: &str) -> i64 {
    lock_key(&format!("holder:{id}"))
}

/// The advisory lock key of the operation `op`.
pub(crate) fn op_key(op: &str) -> i64 {
    lock_key(&format!("op:{op}"))
}

/// Whether the session advisory lock `key` is held by some session (it cannot be taken now).
/// Errors count as held: never take over work that may still be going.
fn pg_held(c: &Conn<'_>, key: i64) -> bool {
    let got = c.query_row("SELECT pg_try_advisory_lock(?1)", [key], |r| {
        r.get::<_, bool>(0)
    });
    match got {
        Ok(true) => {
            let _ = c.query_row("SELECT pg_advisory_unlock(?1)", [key], |r| {
                r.get::<_, bool>(0)
            });
            false
        }
        _ => true,
    }
}

impl Holder {
    /// Registers a new holder of lock files in `dir` (created owner-only).
    pub(crate) fn register(dir: &Path) -> Result<Holder> {
        cairn_store::fsutil::ensure_dir(dir)?;
        let id = fresh_holder_id();
        let path = dir.join(format!("{id}.lock"));
        let file = lock_fresh(&path, "lock a new holder file")?;
        Ok(Holder::Files(FileHolder {
            id,
            dir: dir.to_path_buf(),
            path,
            file: Some(file),
        }))
    }

    /// Registers a new holder as a session advisory lock of `pg`.
    pub(crate) fn register_pg(pg: &mut PgClient) -> Result<Holder> {
        let id = fresh_holder_id();
        pg.query("SELECT pg_advisory_lock(?1)::text", [holder_key(&id)])
            .db("register this handle")?;
        Ok(Holder::Pg { id })
    }

    /// This holder's id.
    pub(crate) fn id(&self) -> &str {
        match self {
            Holder::Files(h) => &h.id,
            Holder::Pg { id } => id,
        }
    }

    /// Whether the holder `other` is alive (its file exists and is locked; its advisory lock
    /// is held). Errors count as alive: never take over work that may still be going.
    pub(crate) fn is_alive(&self, c: &Conn<'_>, other: &str) -> bool {
        if other == self.id() {
            return true;
        }
        if !holder_id_ok(other) {
            return false;
        }
        match self {
            Holder::Files(h) => locked(&h.dir.join(format!("{other}.lock"))),
            Holder::Pg { .. } => pg_held(c, holder_key(other)),
        }
    }

    /// Registers an operation (a rewind, a fork, an admission) of a file holder: an `flock`ed
    /// file held while it works, so any process can tell it from one a crash or a panic
    /// stopped. On PostgreSQL the caller takes the operation's advisory lock instead.
    pub(crate) fn lock_op(&self, op: &str) -> Result<Option<OpLock>> {
        if !op_ok(op) {
            return Err(Error::InvalidArgument(format!(
                "'{op}' cannot name an operation"
            )));
        }
        match self {
            Holder::Files(h) => {
                let path = h.op_path(op);
                let file = lock_fresh(&path, "lock an operation file")?;
                Ok(Some(OpLock {
                    path,
                    file: Some(file),
                }))
            }
            Holder::Pg { .. } => Ok(None),
        }
    }

    /// Whether the operation `op` is still going (its file is locked; its advisory lock is
    /// held).
    pub(crate) fn op_alive(&self, c: &Conn<'_>, op: &str) -> bool {
        if !op_ok(op) {
            return false;
        }
        match self {
            Holder::Files(h) => locked(&h.op_path(op)),
            Holder::Pg { .. } => pg_held(c, op_key(op)),
        }
    }
}

impl FileHolder {
    fn op_path(&self, op: &str) -> PathBuf {
        self.dir.join(format!("op-{}.lock", op.replace(':', "-")))
    }
}

/// A held operation file; dropping it removes the file and releases the lock.
#[derive(Debug)]
pub(crate) struct OpLock {
    path: PathBuf,
    file: Option<HeldLock>,
}

impl Drop for OpLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

/// Opens (creating) the lock file at `path` and takes its lock, which nobody else may hold.
/// The lock ends with `LOCK_UN` when dropped (see `cairn_store::fsutil::HeldLock`).
fn lock_fresh(path: &Path, action: &'static str) -> Result<HeldLock> {
    let file = cairn_store::fsutil::open_lock_file(path)?;
    HeldLock::take(file, LockMode::Exclusive, false, path)?.ok_or_else(|| Error::Io {
        action,
        path: path.to_path_buf(),
        source: std::io::Error::other("someone else holds this lock file"),
    })
}

/// Whether the lock file at `path` is held by someone. A file whose lock can be taken
/// belongs to a process that is gone: it is removed. Errors count as held.
fn locked(path: &Path) -> bool {
    let file = match open_existing(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    match HeldLock::take(file, LockMode::Exclusive, false, path) {
        Ok(Some(_probe)) => {
            // Its owner is gone: remove the file while we hold its lock.
            let _ = std::fs::remove_file(path);
            false
        }
        Ok(None) => true,
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

impl Drop for FileHolder {
    fn drop(&mut self) {
        // Unlink while the lock is held, then close (which releases it).
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn a_url_loses_its_password_in_the_user_part_and_in_the_parameters() {
        assert_eq!(
            redact_url("postgres://ann:s3cret@db.example:5432/threads?password=x&sslmode=disable"),
            "postgres://ann:***@db.example:5432/threads?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_url("postgresql://ann@db.example/threads"),
            "postgresql://ann@db.example/threads"
        );
        assert_eq!(
            redact_url("postgres://127.0.0.1:1/x"),
            "postgres://127.0.0.1:1/x"
        );
    }
}
