//! The append-only event log: what happened to threads, in order, for every client.

use crate::error::{DbResult, Result};
use crate::ids::ThreadId;
use crate::model::{Event, EventKind};
use crate::rows::emit;
use crate::rows::{conv, json_col, BadValue};
use crate::sql::params;
use crate::threads::Threads;
use std::path::Path;

/// The data of a `restore_applied` event: a restore report's ids and counts (its lists of
/// restored and deleted paths can be long), with its chosen `paths` and `drifted` paths whole.
pub(crate) fn restore_data(
    report: &cairn_restore::Report,
    workspace_id: &str,
    root: &Path,
) -> serde_json::Value {
    let s = &report.summary;
    serde_json::json!({
        "workspace_id": workspace_id,
        "root": root.to_string_lossy(),
        "snapshot_id": report.snapshot_id,
        "safety_snapshot_id": report.safety_snapshot_id,
        "paths": report.paths,
        "drifted": s.drifted,
        "restored": s.restored.len(),
        "deleted": s.deleted.len(),
        "kept": s.kept.len(),
        "unchanged": s.unchanged,
        "journal": report.journal,
    })
}

fn event_row(r: &crate::sql::Row) -> crate::sql::SqlResult<Event> {
    let kind: String = r.get(2)?;
    Ok(Event {
        cursor: r.get(0)?,
        thread_id: r.get(1)?,
        kind: conv(2, EventKind::parse(&kind).ok_or(BadValue(kind.clone())))?,
        data: json_col(3, r.get(3)?)?,
        created_ms: r.get(4)?,
    })
}

impl Threads {
    /// Up to `limit` events after `cursor` (0 for the start), oldest first. Pass the last
    /// event's `cursor` to read on: every process sharing the database sees the same log.
    pub fn events_since(&self, cursor: i64, limit: usize) -> Result<Vec<Event>> {
        self.inner.read(|c| {
            c.prepare(
                "SELECT seq, thread_id, kind, data, created_ms FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )
            .db("read events")?
            .query_map(params![cursor, limit as i64], event_row)
            .db("read events")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read events")
        })
    }

    /// [`Threads::events_since`] for one thread.
    pub fn thread_events_since(
        &self,
        thread: &ThreadId,
        cursor: i64,
        limit: usize,
    ) -> Result<Vec<Event>> {
        self.inner.read(|c| {
            c.prepare(
                "SELECT seq, thread_id, kind, data, created_ms FROM events \
                 WHERE thread_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )
            .db("read events")?
            .query_map(params![thread, cursor, limit as i64], event_row)
            .db("read events")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read events")
        })
    }

    /// Records that a restore of the workspace `workspace_id` at `root` was applied outside
    /// any thread (a `cairn restore`), from its report: a `restore_applied` event with no
    /// thread, so that every process following the log sees it. A rewind with files records
    /// its own restore; a dry run is not recorded.
    pub fn record_restore(
        &self,
        workspace_id: &str,
        root: &Path,
        report: &cairn_restore::Report,
    ) -> Result<()> {
        if report.dry_run {
            return Ok(());
        }
        let data = restore_data(report, workspace_id, root);
        self.inner.write("record a restore", |c| {
            emit(c, None, EventKind::RestoreApplied, data.clone())
        })
    }

    /// The cursor of the newest event (0 when there is none).
    pub fn last_cursor(&self) -> Result<i64> {
        self.inner.read(|c| {
            c.query_row("SELECT coalesce(max(seq), 0) FROM events", (), |r| r.get(0))
                .db("read events")
        })
    }
}
