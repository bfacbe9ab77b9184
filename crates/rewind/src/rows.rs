//! The thread database's rows and the queries that read them: the columns of an entry, a
//! checkpoint and a thread and how a row becomes one, the lookups every module shares
//! (`load_*`, `require_thread`, the active branch, a thread's lineage), and the two writes
//! that many operations make (`emit` an event, `note_workspace`). The [`crate::Threads`] API
//! is in `threads/`; this is what it and the other modules read and write rows with.

use crate::error::{DbResult, Error, Result};
use crate::ids::{CheckpointId, EntryId, ThreadId};
use crate::model::{
    root_bytes, root_path, Checkpoint, CheckpointKind, CheckpointRef, Entry, EntryKind, EventKind,
    Thread,
};
use crate::sql::{params, Conn, OptionalExtension};
use cairn_store::SnapshotId;
use std::path::{Path, PathBuf};

/// Appends an event to the log.
pub(crate) fn emit(
    conn: &Conn<'_>,
    thread: Option<&ThreadId>,
    kind: EventKind,
    data: serde_json::Value,
) -> Result<()> {
    conn.execute(
        "INSERT INTO events (thread_id, kind, data, created_ms) VALUES (?1, ?2, ?3, ?4)",
        params![thread, kind.name(), data.to_string(), conn.now_ms()],
    )
    .db("append an event")?;
    Ok(())
}

pub(crate) fn conv<T, E>(idx: usize, r: std::result::Result<T, E>) -> crate::sql::SqlResult<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    r.map_err(|e| crate::error::DbError::Value {
        column: idx,
        message: e.to_string(),
    })
}

#[derive(Debug)]
pub(crate) struct BadValue(pub String);

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unexpected value '{}'", self.0)
    }
}

impl std::error::Error for BadValue {}

pub(crate) fn snapshot_col(idx: usize, s: String) -> crate::sql::SqlResult<SnapshotId> {
    conv(idx, SnapshotId::from_hex(&s))
}

pub(crate) fn json_col(idx: usize, s: String) -> crate::sql::SqlResult<serde_json::Value> {
    conv(idx, serde_json::from_str(&s))
}

/// The columns of an entry with its checkpoint, for [`entry_row`].
pub(crate) const ENTRY_COLS: &str = "e.seq, e.id, e.thread_id, e.parent_id, e.kind, e.payload, \
     e.metadata, e.run_id, e.key, e.created_ms, c.id, c.snapshot_id, c.workspace_id, c.root";

/// The table expression [`ENTRY_COLS`] reads from.
pub(crate) const ENTRY_FROM: &str = "entries e LEFT JOIN checkpoints c ON c.id = e.checkpoint_id";

/// A checkpoint reference from the columns id, snapshot id, workspace id and root at `at`.
fn checkpoint_ref_cols(
    r: &crate::sql::Row,
    at: usize,
) -> crate::sql::SqlResult<Option<CheckpointRef>> {
    let Some(id) = r.get::<_, Option<CheckpointId>>(at)? else {
        return Ok(None);
    };
    Ok(Some(CheckpointRef {
        checkpoint_id: id,
        snapshot_id: snapshot_col(at + 1, r.get(at + 1)?)?,
        workspace_id: r.get(at + 2)?,
        root: root_path(r.get(at + 3)?),
    }))
}

pub(crate) fn entry_row(r: &crate::sql::Row) -> crate::sql::SqlResult<Entry> {
    let kind: String = r.get(4)?;
    let checkpoint = checkpoint_ref_cols(r, 10)?;
    Ok(Entry {
        seq: r.get(0)?,
        id: r.get(1)?,
        thread_id: r.get(2)?,
        parent_id: r.get(3)?,
        kind: conv(4, EntryKind::parse(&kind).ok_or(BadValue(kind.clone())))?,
        payload: r.get(5)?,
        metadata: json_col(6, r.get(6)?)?,
        run_id: r.get(7)?,
        key: r.get(8)?,
        created_ms: r.get(9)?,
        checkpoint,
        on_active_branch: false,
    })
}

pub(crate) const CHECKPOINT_COLS: &str =
    "c.id, c.thread_id, c.entry_id, c.kind, c.label, c.snapshot_id, c.workspace_id, c.root, c.run_id, c.created_ms, c.seq";

pub(crate) fn checkpoint_row(r: &crate::sql::Row) -> crate::sql::SqlResult<Checkpoint> {
    let kind: String = r.get(3)?;
    Ok(Checkpoint {
        id: r.get(0)?,
        thread_id: r.get(1)?,
        entry_id: r.get(2)?,
        kind: conv(
            3,
            CheckpointKind::parse(&kind).ok_or(BadValue(kind.clone())),
        )?,
        label: r.get(4)?,
        snapshot_id: snapshot_col(5, r.get(5)?)?,
        workspace_id: r.get(6)?,
        root: root_path(r.get(7)?),
        run_id: r.get(8)?,
        created_ms: r.get(9)?,
    })
}

pub(crate) fn load_checkpoint(conn: &Conn<'_>, id: &CheckpointId) -> Result<Option<Checkpoint>> {
    conn.query_row(
        &format!("SELECT {CHECKPOINT_COLS} FROM checkpoints c WHERE c.id = ?1"),
        [id],
        checkpoint_row,
    )
    .optional()
    .db("read a checkpoint")
}

pub(crate) fn load_entry(conn: &Conn<'_>, id: &EntryId) -> Result<Option<Entry>> {
    conn.query_row(
        &format!("SELECT {ENTRY_COLS} FROM {ENTRY_FROM} WHERE e.id = ?1"),
        [id],
        entry_row,
    )
    .optional()
    .db("read an entry")
}

pub(crate) fn load_thread(conn: &Conn<'_>, id: &ThreadId) -> Result<Option<Thread>> {
    conn.query_row(
        "SELECT t.id, t.active_leaf, t.parent_thread, t.fork_entry, t.metadata, t.created_ms, \
         c.id, c.snapshot_id, c.workspace_id, c.root \
         FROM threads t LEFT JOIN checkpoints c ON c.id = t.file_checkpoint_at \
         WHERE t.id = ?1 AND t.state = 'ready'",
        [id],
        |r| {
            let file_checkpoint_at = checkpoint_ref_cols(r, 6)?;
            Ok(Thread {
                id: r.get(0)?,
                active_leaf: r.get(1)?,
                parent_thread: r.get(2)?,
                fork_entry: r.get(3)?,
                metadata: json_col(4, r.get(4)?)?,
                created_ms: r.get(5)?,
                file_checkpoint_at,
            })
        },
    )
    .optional()
    .db("read a thread")
}

pub(crate) fn require_thread(conn: &Conn<'_>, id: &ThreadId) -> Result<Thread> {
    load_thread(conn, id)?.ok_or_else(|| {
        Error::not_found(
            format!("thread {id}"),
            "create it with create_thread, or list the threads with threads()",
        )
    })
}

/// Records that a thread used a workspace (checkpoints from it may be restored there).
pub(crate) fn note_workspace(
    conn: &Conn<'_>,
    thread: &ThreadId,
    workspace_id: &str,
    root: &Path,
) -> Result<()> {
    conn.execute(
        "INSERT INTO thread_workspaces (thread_id, workspace_id, root, first_ms) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
        params![thread, workspace_id, root_bytes(root), conn.now_ms()],
    )
    .db("record the thread's workspace")?;
    Ok(())
}

/// A hold of a thread or workspace by a rewind or fork in flight.
#[derive(Debug, Clone)]
pub(crate) struct HoldRow {
    pub(crate) thread_id: Option<ThreadId>,
    pub(crate) workspace_id: Option<String>,
    pub(crate) root: Option<PathBuf>,
    pub(crate) op: String,
}

pub(crate) fn thread_exists(c: &Conn<'_>, id: &ThreadId) -> Result<bool> {
    c.query_row("SELECT 1 FROM threads WHERE id = ?1", [id], |_| Ok(()))
        .optional()
        .db("look up a thread")
        .map(|o| o.is_some())
}

/// The entries from the first to `leaf`, in order.
pub(crate) fn active_entries(c: &Conn<'_>, leaf: Option<&EntryId>) -> Result<Vec<Entry>> {
    let Some(leaf) = leaf else {
        return Ok(Vec::new());
    };
    let sql = format!(
        "WITH RECURSIVE chain(id, depth) AS ( \
           SELECT id, 0 FROM entries WHERE id = ?1 \
           UNION ALL SELECT p.parent_id, chain.depth + 1 FROM entries p JOIN chain ON p.id = chain.id \
             WHERE p.parent_id IS NOT NULL) \
         SELECT {ENTRY_COLS} FROM chain JOIN entries e ON e.id = chain.id \
         LEFT JOIN checkpoints c ON c.id = e.checkpoint_id ORDER BY chain.depth DESC"
    );
    c.prepare(&sql)
        .db("read the active branch")?
        .query_map([leaf], entry_row)
        .db("read the active branch")?
        .collect::<crate::sql::SqlResult<_>>()
        .db("read the active branch")
}

/// Every entry a thread sees: the prefix it shares with the threads it was forked from, and
/// its own entries, in the order they were written.
pub(crate) fn lineage_entries(c: &Conn<'_>, t: &Thread) -> Result<Vec<Entry>> {
    let sql = format!(
        "WITH RECURSIVE prefix(id) AS ( \
           SELECT CAST(?2 AS TEXT) WHERE CAST(?2 AS TEXT) IS NOT NULL \
           UNION ALL SELECT p.parent_id FROM entries p JOIN prefix ON p.id = prefix.id \
             WHERE p.parent_id IS NOT NULL) \
         SELECT {ENTRY_COLS} FROM {ENTRY_FROM} \
         WHERE e.thread_id = ?1 OR e.id IN (SELECT id FROM prefix) ORDER BY e.seq"
    );
    c.prepare(&sql)
        .db("read a thread's entries")?
        .query_map(params![t.id, t.fork_entry], entry_row)
        .db("read a thread's entries")?
        .collect::<crate::sql::SqlResult<_>>()
        .db("read a thread's entries")
}
