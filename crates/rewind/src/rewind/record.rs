//! The rewind record: written before the files change, read back by its idempotency key,
//! closed once the rewind is done or failed.

use super::*;

impl Threads {
    pub(super) fn record_by_key(&self, thread: &ThreadId, key: &str) -> Result<Option<RecordRow>> {
        self.inner.read(|c| {
            c.query_row(
                &format!("SELECT {RECORD_COLS} FROM rewinds WHERE thread_id = ?1 AND key = ?2"),
                params![thread, key],
                record_row,
            )
            .optional()
            .db("read a rewind record")
        })
    }

    pub(super) fn stored_report(&self, rec: &RecordRow) -> Result<RewindReport> {
        let text = rec
            .report
            .as_deref()
            .ok_or_else(|| corrupt(&rec.id, "a completed rewind has no report"))?;
        decode(&rec.id, text)
    }

    /// Writes `note` as the record's message while it stays unfinished (a rewind waiting for
    /// its files' recovery), so that the thread's rewinds say where the files stand.
    pub(super) fn note_record(&self, id: &RewindId, op: &str, note: &str) -> Result<()> {
        self.inner.write("note an unfinished rewind", |c| {
            c.execute(
                "UPDATE rewinds SET error = ?3 WHERE id = ?1 AND op = ?2",
                params![id, op, note],
            )
            .db("note an unfinished rewind")?;
            Ok(())
        })
    }

    /// Marks a record failed, releases its holds and says so in the events; returns `err`.
    pub(super) fn fail_record(
        &self,
        id: &RewindId,
        op: &str,
        thread: &ThreadId,
        err: Error,
    ) -> Error {
        use cairn_store::Classify;
        let kind = err.kind();
        let message = err.to_string();
        let written = self.inner.write("record a failed rewind", |c| {
            close_record(
                c,
                id,
                op,
                thread,
                Closing::Failed(&message),
                serde_json::json!({ "rewind_id": id, "kind": kind, "message": message }),
            )
        });
        match written {
            Ok(()) => err,
            Err(_) => err,
        }
    }
}

/// Records the "Before rewind" checkpoint of a rewind whose restore changed files: its safety
/// snapshot, at the active leaf `previous` the rewind left.
pub(super) fn record_before_rewind(
    c: &Conn<'_>,
    thread: &ThreadId,
    previous: Option<&EntryId>,
    ch: &ChosenFiles,
    safety: &cairn_store::SnapshotId,
    rewind: &RewindId,
) -> Result<CheckpointId> {
    let cp_id = CheckpointId::generate();
    c.execute(
        "INSERT INTO checkpoints (id, thread_id, entry_id, kind, label, snapshot_id, workspace_id, root, run_id, created_ms) \
         VALUES (?1, ?2, ?3, 'manual', ?4, ?5, ?6, ?7, NULL, ?8)",
        params![
            cp_id,
            thread,
            previous,
            BEFORE_REWIND,
            safety.to_hex(),
            ch.workspace_id,
            root_bytes(&ch.root),
            c.now_ms()
        ],
    )
    .db("record the Before rewind checkpoint")?;
    emit(
        c,
        Some(thread),
        EventKind::CheckpointCreated,
        serde_json::json!({
            "checkpoint_id": cp_id, "entry_id": previous, "snapshot_id": safety,
            "workspace_id": ch.workspace_id, "kind": "manual", "label": BEFORE_REWIND,
            "rewind_id": rewind,
        }),
    )?;
    Ok(cp_id)
}

/// How a rewind record ends.
pub(super) enum Closing<'a> {
    /// With its report (JSON).
    Completed(&'a str),
    /// With an error message.
    Failed(&'a str),
}

/// Ends a rewind record, releases its holds and says so in the events.
pub(super) fn close_record(
    c: &Conn<'_>,
    id: &RewindId,
    op: &str,
    thread: &ThreadId,
    how: Closing<'_>,
    data: serde_json::Value,
) -> Result<()> {
    let (sql, text, event) = match how {
        Closing::Completed(report) => (
            "UPDATE rewinds SET state = 'completed', report = ?2, finished_ms = ?3 WHERE id = ?1",
            report,
            EventKind::RewindCompleted,
        ),
        Closing::Failed(error) => (
            "UPDATE rewinds SET state = 'failed', error = ?2, finished_ms = ?3 WHERE id = ?1",
            error,
            EventKind::RewindFailed,
        ),
    };
    c.execute(sql, params![id, text, c.now_ms()])
        .db("close a rewind record")?;
    c.execute("DELETE FROM holds WHERE op = ?1", [op])
        .db("release a hold")?;
    emit(c, Some(thread), event, data)
}

pub(super) const RECORD_COLS: &str = "id, thread_id, state, holder, op, request, files, report";

pub(super) fn record_row(r: &crate::sql::Row) -> crate::sql::SqlResult<RecordRow> {
    Ok(RecordRow {
        id: r.get(0)?,
        thread_id: r.get(1)?,
        state: r.get(2)?,
        holder: r.get(3)?,
        op: r.get(4)?,
        request: r.get(5)?,
        files: r.get(6)?,
        report: r.get(7)?,
    })
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(
    id: &impl std::fmt::Display,
    text: &str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|e| corrupt(id, e))
}

pub(super) fn corrupt(id: &impl std::fmt::Display, detail: impl std::fmt::Display) -> Error {
    Error::Corrupt {
        what: format!("record {id}"),
        path: PathBuf::new(),
        detail: detail.to_string(),
    }
}
