//! Finishing what a crash left: rewinds whose files were done are completed, the others
//! failed, and holds of processes gone dropped.

use super::*;

impl Threads {
    /// Finishes or fails the rewinds (and takes back the forks) that a crash interrupted:
    /// records whose holder is gone. A rewind whose files were done is completed; one whose
    /// files were being restored is completed when its workspace (among `workspaces`) says the
    /// restore finished, failed when it says it did not, and left for later without its
    /// workspace.
    pub fn recover(&self, workspaces: &[Arc<dyn Files>]) -> Result<Recovery> {
        let list: Vec<&dyn Files> = workspaces.iter().map(|w| w.as_ref()).collect();
        self.recover_where(None, &list)
    }

    pub(crate) fn recover_where(
        &self,
        thread: Option<&ThreadId>,
        workspaces: &[&dyn Files],
    ) -> Result<Recovery> {
        let mut out = Recovery::default();
        let records: Vec<RecordRow> = self.inner.read(|c| {
            c.prepare(&format!(
                "SELECT {RECORD_COLS} FROM rewinds WHERE state IN ('started', 'files_done') \
                 AND (CAST(?1 AS TEXT) IS NULL OR thread_id = ?1) ORDER BY seq"
            ))
            .db("read rewind records")?
            .query_map([thread], record_row)
            .db("read rewind records")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read rewind records")
        })?;
        for rec in records {
            if self.inner.op_alive_now(&rec.holder, &rec.op) {
                continue;
            }
            // Another handle may be claiming it at this very moment: leave it to that one.
            let Ok(guard) = self.inner.begin_op(format!("rewind:{}", rec.id)) else {
                continue;
            };
            let claimed = self.inner.write("claim an interrupted rewind", |c| {
                let n = c
                    .execute(
                        "UPDATE rewinds SET holder = ?2, op = ?3 WHERE id = ?1 AND holder = ?4 AND op = ?5 AND state = ?6",
                        params![rec.id, self.inner.holder_id(), guard.op, rec.holder, rec.op, rec.state],
                    )
                    .db("claim an interrupted rewind")?;
                c.execute("DELETE FROM holds WHERE op = ?1", [&rec.op])
                    .db("release a hold")?;
                Ok(n == 1)
            })?;
            if !claimed {
                continue;
            }
            let request: Request = decode(&rec.id, &rec.request)?;
            let done_files: Option<FileOutcome> = match &rec.files {
                Some(text) => Some(decode(&rec.id, text)?),
                None => None,
            };
            if rec.state == "files_done" || request.files.is_none() {
                out.completed
                    .push(self.finish(&rec.id, &guard.op, &request, done_files, true)?);
                continue;
            }
            let Some(ch) = &request.files else { continue };
            // The workspace id follows its directory (a rename, a bind mount, an adoption).
            let ws = workspaces.iter().find(|w| w.id() == ch.workspace_id);
            let Some(ws) = ws else {
                out.pending.push(rec.id.clone());
                continue;
            };
            match ws.finished(&request.journal_key, &ch.snapshot_id) {
                Ok(Some(o)) => {
                    out.completed
                        .push(self.finish(&rec.id, &guard.op, &request, Some(o), true)?);
                }
                Ok(None) => match ws.interrupted(&request.journal_key) {
                    Ok(crate::files::Interrupted::NotBegun) => {
                        let err = Error::validation(
                            format!(
                                "rewind {} was interrupted before its files were restored; the conversation is as it was: \
                                 rewind again (the same key retries)",
                                rec.id
                            ),
                            Some(rec.id.to_string()),
                        );
                        drop(self.fail_record(&rec.id, &guard.op, &rec.thread_id, err));
                        out.failed.push(rec.id.clone());
                    }
                    Ok(crate::files::Interrupted::Pending { journal, safety }) => {
                        // Part of the files are the checkpoint's: the rewind waits for the
                        // restore's recovery, and the record says where the files stand.
                        let note = format!(
                            "the files are part restored: a crash cut the restore of checkpoint {} and paths in its way \
                             stop its recovery (journal {journal}); the conversation is as it was until it finishes: \
                             resolve them and run `cairn recover` (the rewind then completes, conversation included), \
                             or end the restore with `cairn recover --give-up`{}",
                            ch.checkpoint_id,
                            safety
                                .map(|s| format!(" and put the files back as they were with `cairn restore {}`", s.short()))
                                .unwrap_or_default()
                        );
                        self.note_record(&rec.id, &guard.op, &note)?;
                        out.blocked.push(BlockedRewind {
                            rewind_id: rec.id.clone(),
                            journal,
                            message: note,
                        });
                    }
                    Ok(crate::files::Interrupted::GivenUp { journal, safety }) => {
                        let err = Error::validation(
                            format!(
                                "rewind {} failed: its restore of checkpoint {} was cut by a crash and then given up \
                                 (journal {journal}), so the files are part restored, part as they were; the \
                                 conversation is as it was: {} or rewind again",
                                rec.id,
                                ch.checkpoint_id,
                                safety
                                    .map(|s| format!("`cairn restore {}` puts the files back as they were before the rewind,", s.short()))
                                    .unwrap_or_default()
                            ),
                            Some(rec.id.to_string()),
                        );
                        drop(self.fail_record(&rec.id, &guard.op, &rec.thread_id, err));
                        out.failed.push(rec.id.clone());
                    }
                    Err(_) => out.pending.push(rec.id.clone()),
                },
                Err(_) => out.pending.push(rec.id.clone()),
            }
        }
        out.forks_taken_back = self.take_back_dead_forks()?;
        self.drop_dead_holds()?;
        Ok(out)
    }
    /// Deletes the holds of operations that are gone (they are ignored anyway).
    pub(super) fn drop_dead_holds(&self) -> Result<()> {
        let rows: Vec<(String, String)> = self.inner.read(|c| {
            c.prepare("SELECT DISTINCT op, holder FROM holds")
                .db("read holds")?
                .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
                .db("read holds")?
                .collect::<crate::sql::SqlResult<_>>()
                .db("read holds")
        })?;
        let dead: Vec<String> = rows
            .into_iter()
            .filter(|(op, holder)| !self.inner.op_alive_now(holder, op))
            .map(|(op, _)| op)
            .collect();
        if dead.is_empty() {
            return Ok(());
        }
        self.inner.write("drop stale holds", |c| {
            for op in &dead {
                c.execute("DELETE FROM holds WHERE op = ?1", [op])
                    .db("drop stale holds")?;
            }
            Ok(())
        })
    }
}

/// The continuations of the rewinds not finished yet (started, or with their files done), with
/// their records and threads: the names they will give are promised.
pub(crate) fn unfinished_continuations(
    c: &Conn<'_>,
) -> Result<Vec<(RewindId, ThreadId, Option<Continuation>)>> {
    let rows: Vec<(RewindId, ThreadId, String)> = c
        .prepare(
            "SELECT id, thread_id, request FROM rewinds WHERE state IN ('started', 'files_done')",
        )
        .db("read rewind records")?
        .query_map((), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .db("read rewind records")?
        .collect::<crate::sql::SqlResult<_>>()
        .db("read rewind records")?;
    rows.into_iter()
        .map(|(id, thread, text)| {
            let request: Request = decode(&id, &text)?;
            Ok((id, thread, request.continuation))
        })
        .collect()
}

/// Marks the thread's interrupted rewinds that recovery could not decide as superseded by a
/// new one: their conversation switch must never run after it.
pub(super) fn supersede_dead(
    threads: &Threads,
    c: &Conn<'_>,
    thread: &ThreadId,
    by: &RewindId,
) -> Result<()> {
    let rows: Vec<(RewindId, String, String)> = c
        .prepare("SELECT id, holder, op FROM rewinds WHERE thread_id = ?1 AND state IN ('started', 'files_done') AND id != ?2")
        .db("read rewind records")?
        .query_map(params![thread, by], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .db("read rewind records")?
        .collect::<crate::sql::SqlResult<_>>()
        .db("read rewind records")?;
    for (id, holder, op) in rows {
        if !threads.inner.op_alive(c, &holder, &op) {
            c.execute(
                "UPDATE rewinds SET state = 'failed', error = ?2, finished_ms = ?3 WHERE id = ?1",
                params![
                    id,
                    format!("interrupted by a crash and superseded by rewind {by}"),
                    c.now_ms()
                ],
            )
            .db("supersede a rewind")?;
        }
    }
    Ok(())
}

pub(crate) fn insert_hold(
    c: &Conn<'_>,
    thread: Option<&ThreadId>,
    ws: Option<(&str, &std::path::Path)>,
    op: &str,
    holder: &str,
) -> Result<()> {
    c.execute(
        "INSERT INTO holds (thread_id, workspace_id, root, op, holder, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![thread, ws.map(|w| w.0), ws.map(|w| root_bytes(w.1)), op, holder, c.now_ms()],
    )
    .db("hold a thread or workspace")?;
    Ok(())
}
