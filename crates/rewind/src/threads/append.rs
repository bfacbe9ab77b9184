//! Appending an entry: admitted once per idempotency key, checked, checkpointed before when
//! the policy says so, written with its event.

use super::*;

impl Threads {
    /// Appends an entry after the thread's active leaf.
    ///
    /// Before a `user` entry (and, as the policy says, a `tool` or `compaction` entry) a
    /// checkpoint of the workspace is taken, labelled with the entry's id and named in its
    /// metadata under [`FILE_CHECKPOINT_KEY`]. A checkpoint that fails is reported in
    /// [`Appended::checkpoint_error`] and the entry is saved without one. With an admission key
    /// seen before, the first entry is returned and nothing is written.
    pub fn append(
        &self,
        thread: &ThreadId,
        entry: NewEntry,
        opts: &AppendOptions,
    ) -> Result<Appended> {
        self.check_append(thread, &entry, opts)?;
        let entry_id = EntryId::generate();
        let admission = match self.admit(thread, &entry_id, opts)? {
            Admission::Repeated(first) => return Ok(*first),
            Admission::Fresh(admission) => admission,
        };
        let result = self.write_entry(thread, entry, opts, &entry_id);
        if let (Err(_), Some((key, guard))) = (&result, &admission) {
            self.release_admission(thread, key, &guard.op);
        }
        drop(admission);
        result
    }

    /// The first step of [`Threads::append`]: the entry's metadata is an object, the run (if
    /// any) is this thread's and alive, and a rewind a crash interrupted is finished first.
    pub(super) fn check_append(
        &self,
        thread: &ThreadId,
        entry: &NewEntry,
        opts: &AppendOptions,
    ) -> Result<()> {
        check_object(&entry.metadata, "entry metadata")?;
        if let Some(run) = &opts.run {
            if run.thread_id() != thread {
                return Err(Error::InvalidArgument(format!(
                    "run {} belongs to thread {}, not {thread}; append through a run of this thread",
                    run.id(),
                    run.thread_id()
                )));
            }
            self.check_run_alive(run)?;
        }
        let ws_for_recovery = opts
            .run
            .as_ref()
            .and_then(|r| r.shared.workspace.clone())
            .or_else(|| opts.workspace.clone());
        self.settle_thread(thread, ws_for_recovery.as_deref())
    }

    /// Admits the entry: without a key, the thread must exist and no rewind hold it; with one,
    /// the key is reserved (or was admitted before: the first entry is the answer).
    pub(super) fn admit<'k>(
        &self,
        thread: &ThreadId,
        entry_id: &EntryId,
        opts: &'k AppendOptions,
    ) -> Result<Admission<'k, '_>> {
        let Some(key) = &opts.key else {
            self.inner.read(|c| {
                require_thread(c, thread)?;
                self.check_not_held(c, thread)
            })?;
            return Ok(Admission::Fresh(None));
        };
        let guard = self.inner.begin_op(format!("admit:{entry_id}"))?;
        Ok(
            match self.admit_key(thread, key, entry_id, &guard.op, opts.wait)? {
                Some(first) => Admission::Repeated(Box::new(first)),
                None => Admission::Fresh(Some((key, guard))),
            },
        )
    }

    /// Gives up a reserved admission key whose entry could not be written, so that the key
    /// can be tried again.
    pub(super) fn release_admission(&self, thread: &ThreadId, key: &str, op: &str) {
        let _ = self.inner.write("release an admission", |c| {
            c.execute(
                "DELETE FROM admissions WHERE thread_id = ?1 AND key = ?2 AND op = ?3 AND state = 'pending'",
                params![thread, key, op],
            )
            .db("release an admission")?;
            Ok(())
        });
    }

    /// Reserves admission key `key` for `entry_id`. `Some` when the key was admitted before:
    /// the first entry.
    pub(super) fn admit_key(
        &self,
        thread: &ThreadId,
        key: &str,
        entry_id: &EntryId,
        op: &str,
        wait: Duration,
    ) -> Result<Option<Appended>> {
        let wait = if wait.is_zero() {
            Duration::from_secs(30)
        } else {
            wait
        };
        let deadline = Instant::now() + wait;
        loop {
            enum Step {
                Reserved,
                Done(EntryId),
                Wait,
            }
            let step = self.inner.write("admit an entry", |c| {
                require_thread(c, thread)?;
                let row: Option<(EntryId, String, String, String)> = c
                    .query_row(
                        "SELECT entry_id, state, holder, op FROM admissions WHERE thread_id = ?1 AND key = ?2",
                        params![thread, key],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )
                    .optional()
                    .db("read an admission")?;
                match row {
                    Some((first, state, _, _)) if state == "done" => Ok(Step::Done(first)),
                    Some((_, _, holder, other)) if self.inner.op_alive(c, &holder, &other) => Ok(Step::Wait),
                    found => {
                        self.check_not_held(c, thread)?;
                        super::inbox::refuse_cancelled_key(c, thread, key)?;
                        let sql = if found.is_some() {
                            "UPDATE admissions SET entry_id = ?3, holder = ?4, op = ?5, created_ms = ?6 \
                             WHERE thread_id = ?1 AND key = ?2"
                        } else {
                            "INSERT INTO admissions (thread_id, key, entry_id, state, holder, op, created_ms) \
                             VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6)"
                        };
                        c.execute(sql, params![thread, key, entry_id, self.inner.holder_id(), op, c.now_ms()])
                            .db("reserve an admission key")?;
                        Ok(Step::Reserved)
                    }
                }
            })?;
            match step {
                Step::Reserved => return Ok(None),
                Step::Done(first) => {
                    let entry = self.entry(&first)?;
                    let checkpoint = match &entry.checkpoint {
                        Some(r) => self.inner.read(|c| load_checkpoint(c, &r.checkpoint_id))?,
                        None => None,
                    };
                    return Ok(Some(Appended {
                        entry,
                        checkpoint,
                        checkpoint_error: None,
                        repeated: true,
                    }));
                }
                Step::Wait if Instant::now() >= deadline => {
                    return Err(Error::ThreadBusy {
                        thread: thread.clone(),
                        detail: format!(
                            "another append with admission key '{key}' is being admitted; try again when it is done"
                        ),
                    })
                }
                Step::Wait => std::thread::sleep(POLL),
            }
        }
    }

    /// The steps of an admitted append: the checkpoint before it (when one is due), then in
    /// one transaction the checkpoint's record, the entry's row and the event; the entry as
    /// written.
    pub(super) fn write_entry(
        &self,
        thread: &ThreadId,
        entry: NewEntry,
        opts: &AppendOptions,
        entry_id: &EntryId,
    ) -> Result<Appended> {
        let (checkpoint, checkpoint_error) = self.checkpoint_before(thread, &entry, opts, entry_id);
        self.inner.write("append an entry", |c| {
            self.insert_appended(
                c,
                thread,
                &entry,
                opts,
                entry_id,
                checkpoint,
                checkpoint_error,
            )
        })
    }

    /// The transaction of an admitted append (in `c`): the checkpoint's record, the entry's
    /// row and the event; the entry as written. A queued prompt's delivery runs it inside its
    /// own transaction.
    #[allow(clippy::too_many_arguments)] // the parts of one append, each used once
    pub(super) fn insert_appended(
        &self,
        c: &Conn<'_>,
        thread: &ThreadId,
        entry: &NewEntry,
        opts: &AppendOptions,
        entry_id: &EntryId,
        checkpoint: Option<TakenCheckpoint>,
        checkpoint_error: Option<CheckpointFailure>,
    ) -> Result<Appended> {
        let run_id = opts.run.as_ref().map(|r| r.id().clone());
        let metadata = metadata_with_checkpoint(entry.metadata.clone(), checkpoint.as_ref());
        let t = require_thread(c, thread)?;
        self.check_not_held(c, thread)?;
        if let Some(run) = &opts.run {
            self.check_run_alive_in(c, run)?;
        }
        let now = c.now_ms();
        if let Some(cp) = &checkpoint {
            record_checkpoint(c, thread, entry_id, entry.kind, cp, run_id.as_ref(), now)?;
        }
        let row = EntryRow {
            id: entry_id,
            thread,
            parent: t.active_leaf.as_ref(),
            entry,
            metadata: &metadata,
            checkpoint: checkpoint.as_ref().map(|cp| &cp.id),
            run: run_id.as_ref(),
            key: opts.key.as_deref(),
            now,
        };
        insert_entry(c, &row)?;
        emit_appended(c, &row)?;
        let mut entry = load_entry(c, entry_id)?
            .ok_or_else(|| Error::not_found(format!("entry {entry_id}"), "it was just written"))?;
        // It is the thread's new active leaf.
        entry.on_active_branch = true;
        let checkpoint = match &checkpoint {
            Some(cp) => load_checkpoint(c, &cp.id)?,
            None => None,
        };
        Ok(Appended {
            entry,
            checkpoint,
            checkpoint_error,
            repeated: false,
        })
    }
}

/// How [`Threads::admit`] let an append in.
pub(super) enum Admission<'k, 'g> {
    /// Its key was admitted before: the first entry is the answer, nothing is written.
    Repeated(Box<Appended>),
    /// It is to be written; with a key, the key and the admission reserving it (released if
    /// the write fails).
    Fresh(Option<(&'k str, OpGuard<'g>)>),
}

/// An entry's row as an append writes it.
pub(super) struct EntryRow<'a> {
    pub(super) id: &'a EntryId,
    pub(super) thread: &'a ThreadId,
    pub(super) parent: Option<&'a EntryId>,
    pub(super) entry: &'a NewEntry,
    pub(super) metadata: &'a serde_json::Value,
    pub(super) checkpoint: Option<&'a CheckpointId>,
    pub(super) run: Option<&'a RunId>,
    pub(super) key: Option<&'a str>,
    pub(super) now: i64,
}

/// Inserts the entry after the thread's active leaf, makes it the leaf, and completes its
/// admission key.
pub(super) fn insert_entry(c: &Conn<'_>, row: &EntryRow<'_>) -> Result<()> {
    c.execute(
        "INSERT INTO entries (id, thread_id, parent_id, kind, payload, metadata, checkpoint_id, run_id, key, created_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            row.id,
            row.thread,
            row.parent,
            row.entry.kind.name(),
            row.entry.payload,
            row.metadata.to_string(),
            row.checkpoint,
            row.run,
            row.key,
            row.now
        ],
    )
    .db("append an entry")?;
    c.execute(
        "UPDATE threads SET active_leaf = ?2 WHERE id = ?1",
        params![row.thread, row.id],
    )
    .db("move the active leaf")?;
    if let Some(key) = row.key {
        c.execute(
            "UPDATE admissions SET state = 'done', entry_id = ?3 WHERE thread_id = ?1 AND key = ?2",
            params![row.thread, key, row.id],
        )
        .db("complete an admission")?;
    }
    Ok(())
}

/// The event of an appended entry.
pub(super) fn emit_appended(c: &Conn<'_>, row: &EntryRow<'_>) -> Result<()> {
    emit(
        c,
        Some(row.thread),
        EventKind::EntryAppended,
        serde_json::json!({
            "entry_id": row.id, "kind": row.entry.kind, "parent_id": row.parent,
            "checkpoint_id": row.checkpoint,
        }),
    )
}

pub(super) fn check_object(v: &serde_json::Value, what: &str) -> Result<()> {
    if v.is_object() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{what} must be a JSON object, not {v}"
        )))
    }
}
