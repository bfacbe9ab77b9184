//! The inbox of a thread (issue 59): prompts queued with their admission key while the thread
//! is under way, delivered at its next safe boundary with their checkpoint taken then, and
//! cancelled by a rewind of the thread.
//!
//! # Under way, and the safe boundary
//!
//! A thread is *under way* while one of its runs is running or paused (waiting for an approval
//! is work in progress) with its lease not run out and its holder alive, or while a tool call
//! of one of its runs is open (from [`Threads::tool_start`] to [`Threads::tool_finish`], lease
//! not run out, holder alive; a tool call may outlive its run). Otherwise it is at a *safe
//! boundary*. A run that asks for the delivery itself ([`DeliverOptions::run`]: an agent loop
//! that keeps one run for a whole session, at the end of a turn) does not count against it
//! while it is running; its open tool calls, and every other run of the thread, still do.
//!
//! # Admission keys
//!
//! A key names one admission of a thread for ever: queued again, it returns that admission as
//! it is now (`queued`, `delivered` with its entry and checkpoint, or `cancelled` by the rewind
//! named) and never sends the prompt twice. The key is the delivered entry's admission key too:
//! a key appended directly ([`Threads::append`]) answers as `delivered` with that entry, and
//! the key of a cancelled prompt is refused by `append`.

use super::*;
use crate::ids::RewindId;
use crate::rows::conv;
use crate::runs::active_runs;

/// Where a queued prompt stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PromptState {
    /// Waiting for the thread's next safe boundary.
    Queued,
    /// Delivered: appended as a user entry, with the checkpoint taken at delivery.
    Delivered,
    /// Cancelled by a rewind of the thread before it was delivered; never sent.
    Cancelled,
}

impl PromptState {
    /// The name stored in the database and used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            PromptState::Queued => "queued",
            PromptState::Delivered => "delivered",
            PromptState::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<PromptState> {
        Some(match s {
            "queued" => PromptState::Queued,
            "delivered" => PromptState::Delivered,
            "cancelled" => PromptState::Cancelled,
            _ => return None,
        })
    }
}

/// The admission of a prompt in a thread's inbox, under its key.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Admission {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its admission key.
    pub key: String,
    /// Queued, delivered or cancelled.
    pub state: PromptState,
    /// The prompt (opaque bytes, as the runtime encodes it).
    #[serde(skip)]
    pub payload: Vec<u8>,
    /// Its metadata (a JSON object; the delivered entry's, before its checkpoint is added).
    pub metadata: serde_json::Value,
    /// Delivered: the entry it became.
    pub entry_id: Option<EntryId>,
    /// Delivered: the checkpoint taken at delivery (none when no checkpoint was due).
    pub checkpoint_id: Option<CheckpointId>,
    /// Cancelled: the rewind that cancelled it.
    pub rewind_id: Option<RewindId>,
    /// Still queued after a delivery failed: why (a checkpoint that could not be taken).
    pub error: Option<String>,
    /// When it was queued (ms since the Unix epoch).
    pub queued_ms: i64,
    /// When it was delivered or cancelled.
    pub done_ms: Option<i64>,
    /// The key was seen before: this is that admission, and nothing was written.
    pub repeated: bool,
}

/// What [`Threads::deliver`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Delivery {
    /// The prompt delivered by this call (its admission, now `delivered`), if any.
    pub delivered: Option<Admission>,
    /// The user entry it became.
    pub entry: Option<Entry>,
    /// The checkpoint taken at delivery, before the entry.
    pub checkpoint: Option<Checkpoint>,
    /// Nothing was delivered because the thread is under way: what (a run, a tool call).
    pub waiting: Option<String>,
    /// How many prompts of the thread are still queued.
    pub queued: u64,
}

/// How to deliver: the run (at its own turn's end) or the workspace whose checkpoint is
/// taken, as for [`Threads::append`].
#[derive(Clone, Default)]
pub struct DeliverOptions {
    /// The run delivering, between its turns: its workspace and policy decide the checkpoint,
    /// and it does not count as under way while it is running.
    pub run: Option<Run>,
    /// Without a run: a workspace to checkpoint with the runtime's policy.
    pub workspace: Option<Arc<dyn Files>>,
    /// How long to wait for an append of the same key that is being admitted. Default
    /// (zero) means 30 s.
    pub wait: Duration,
}

impl std::fmt::Debug for DeliverOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliverOptions")
            .field("run", &self.run.as_ref().map(|r| r.id()))
            .field("workspace", &self.workspace.as_ref().map(|w| w.id()))
            .field("wait", &self.wait)
            .finish()
    }
}

const INBOX_COLS: &str = "thread_id, key, state, payload, metadata, entry_id, checkpoint_id, \
                          rewind_id, error, queued_ms, done_ms";

fn admission_row(r: &crate::sql::Row) -> crate::sql::SqlResult<Admission> {
    let state: String = r.get(2)?;
    Ok(Admission {
        thread_id: r.get(0)?,
        key: r.get(1)?,
        state: conv(
            2,
            PromptState::parse(&state).ok_or(crate::rows::BadValue(state.clone())),
        )?,
        payload: r.get(3)?,
        metadata: crate::rows::json_col(4, r.get(4)?)?,
        entry_id: r.get(5)?,
        checkpoint_id: r.get(6)?,
        rewind_id: r.get(7)?,
        error: r.get(8)?,
        queued_ms: r.get(9)?,
        done_ms: r.get(10)?,
        repeated: false,
    })
}

/// The admission of `key` in `thread`'s inbox, if any.
pub(crate) fn load_admission(
    c: &Conn<'_>,
    thread: &ThreadId,
    key: &str,
) -> Result<Option<Admission>> {
    c.query_row(
        &format!("SELECT {INBOX_COLS} FROM inbox WHERE thread_id = ?1 AND key = ?2"),
        params![thread, key],
        admission_row,
    )
    .optional()
    .db("read an admission of the inbox")
}

fn queued_count(c: &Conn<'_>, thread: &ThreadId) -> Result<u64> {
    c.query_row(
        "SELECT count(*) FROM inbox WHERE thread_id = ?1 AND state = 'queued'",
        [thread],
        |r| r.get::<_, i64>(0),
    )
    .db("count the queued prompts")
    .map(|n| n.max(0) as u64)
}

/// Cancels the prompts still queued in `thread`'s inbox, as part of rewind `rewind`'s last
/// transaction (and so of its recovery); returns their keys.
pub(crate) fn cancel_queued(
    c: &Conn<'_>,
    thread: &ThreadId,
    rewind: &RewindId,
) -> Result<Vec<String>> {
    let keys: Vec<String> = c
        .prepare("SELECT key FROM inbox WHERE thread_id = ?1 AND state = 'queued' ORDER BY seq")
        .db("read the queued prompts")?
        .query_map([thread], |r| r.get(0))
        .db("read the queued prompts")?
        .collect::<crate::sql::SqlResult<_>>()
        .db("read the queued prompts")?;
    let now = c.now_ms();
    for key in &keys {
        c.execute(
            "UPDATE inbox SET state = 'cancelled', rewind_id = ?3, done_ms = ?4 \
             WHERE thread_id = ?1 AND key = ?2 AND state = 'queued'",
            params![thread, key, rewind, now],
        )
        .db("cancel a queued prompt")?;
        emit(
            c,
            Some(thread),
            EventKind::PromptCancelled,
            serde_json::json!({"key": key, "rewind_id": rewind}),
        )?;
    }
    Ok(keys)
}

/// Refuses to append with the key of a prompt a rewind cancelled: it is never sent again.
pub(super) fn refuse_cancelled_key(c: &Conn<'_>, thread: &ThreadId, key: &str) -> Result<()> {
    match load_admission(c, thread, key)? {
        Some(a) if a.state == PromptState::Cancelled => Err(Error::validation(
            format!(
                "the prompt with admission key '{key}' in thread {thread} was cancelled by rewind {}; \
                 it is never sent again: send it with a new key if it is still wanted",
                a.rewind_id.map(|r| r.to_string()).unwrap_or_default()
            ),
            Some(key.to_string()),
        )),
        _ => Ok(()),
    }
}

/// What a delivery's transaction found.
enum Outcome {
    /// The prompt is no longer queued (a rewind cancelled it meanwhile).
    Gone,
    /// The thread went under way meanwhile: what.
    Waiting(String),
    /// Delivered.
    Delivered(Box<Appended>, Box<Admission>),
}

impl Threads {
    /// Queues the user prompt `prompt` in `thread`'s inbox under the admission key `key`, to be
    /// delivered at the thread's next safe boundary ([`Threads::deliver`]). A key seen before
    /// returns its admission as it is now (`repeated`), whatever the prompt: queued, delivered,
    /// or cancelled by a rewind, and nothing is queued again. Refused with `THREAD_BUSY` while
    /// a rewind holds the thread (it would cancel the prompt).
    pub fn enqueue(&self, thread: &ThreadId, key: &str, prompt: NewEntry) -> Result<Admission> {
        if key.is_empty() {
            return Err(Error::InvalidArgument(
                "a queued prompt needs an admission key (not empty)".into(),
            ));
        }
        if prompt.kind != EntryKind::User {
            return Err(Error::InvalidArgument(format!(
                "only user prompts are queued, not a {} entry; append it instead",
                prompt.kind.name()
            )));
        }
        check_object(&prompt.metadata, "prompt metadata")?;
        self.settle_thread(thread, None)?;
        self.inner.write("queue a prompt", |c| {
            require_thread(c, thread)?;
            if let Some(mut first) = load_admission(c, thread, key)? {
                first.repeated = true;
                return Ok(first);
            }
            if let Some(entry) = appended_with_key(c, thread, key)? {
                // Appended directly with this key: that entry is the prompt's.
                return Ok(Admission {
                    thread_id: thread.clone(),
                    key: key.to_string(),
                    state: PromptState::Delivered,
                    payload: entry.payload,
                    metadata: entry.metadata,
                    checkpoint_id: entry.checkpoint.map(|r| r.checkpoint_id),
                    entry_id: Some(entry.id),
                    rewind_id: None,
                    error: None,
                    queued_ms: entry.created_ms,
                    done_ms: Some(entry.created_ms),
                    repeated: true,
                });
            }
            self.check_not_held(c, thread)?;
            c.execute(
                "INSERT INTO inbox (thread_id, key, state, payload, metadata, queued_ms) \
                 VALUES (?1, ?2, 'queued', ?3, ?4, ?5)",
                params![
                    thread,
                    key,
                    prompt.payload,
                    prompt.metadata.to_string(),
                    c.now_ms()
                ],
            )
            .db("queue a prompt")?;
            emit(
                c,
                Some(thread),
                EventKind::PromptQueued,
                serde_json::json!({"key": key}),
            )?;
            load_admission(c, thread, key)?.ok_or_else(|| {
                Error::not_found(format!("admission '{key}'"), "it was just written")
            })
        })
    }

    /// Every admission of `thread`'s inbox, oldest first: queued, delivered and cancelled.
    pub fn inbox(&self, thread: &ThreadId) -> Result<Vec<Admission>> {
        self.inner.read(|c| {
            require_thread(c, thread)?;
            c.prepare(&format!(
                "SELECT {INBOX_COLS} FROM inbox WHERE thread_id = ?1 ORDER BY seq"
            ))
            .db("read the inbox")?
            .query_map([thread], admission_row)
            .db("read the inbox")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read the inbox")
        })
    }

    /// The admission of `key` in `thread`'s inbox (`NotFound` when the key was never queued).
    pub fn admission(&self, thread: &ThreadId, key: &str) -> Result<Admission> {
        self.inner.read(|c| {
            require_thread(c, thread)?;
            load_admission(c, thread, key)?.ok_or_else(|| {
                Error::not_found(
                    format!("admission key '{key}' in the inbox of thread {thread}"),
                    "list the inbox with inbox()",
                )
            })
        })
    }

    /// What keeps `thread` from a safe boundary (see the module's documentation): a run or a
    /// tool call under way, described; `None` at a safe boundary.
    pub fn under_way(&self, thread: &ThreadId) -> Result<Option<String>> {
        self.inner.read(|c| {
            require_thread(c, thread)?;
            self.under_way_in(c, thread, None)
        })
    }

    fn under_way_in(
        &self,
        c: &Conn<'_>,
        thread: &ThreadId,
        own: Option<&RunId>,
    ) -> Result<Option<String>> {
        let now = c.now_ms();
        for row in active_runs(c)?
            .into_iter()
            .filter(|r| &r.thread_id == thread)
        {
            let live = row.lease_expires_ms > now && self.inner.holder.is_alive(c, &row.holder);
            if !live || (own == Some(&row.id) && row.status == crate::RunStatus::Running) {
                continue;
            }
            return Ok(Some(if row.status == crate::RunStatus::Paused {
                format!(
                    "run {} is paused (waiting for an approval is work under way); queued prompts \
                     are delivered once it ends",
                    row.id
                )
            } else {
                format!(
                    "run {} is under way; queued prompts are delivered once it ends",
                    row.id
                )
            }));
        }
        let tools: Vec<(String, String, RunId, i64, String)> = c
            .prepare(
                "SELECT t.id, t.name, t.run_id, t.lease_expires_ms, r.holder FROM tool_calls t \
                 JOIN runs r ON r.id = t.run_id WHERE r.thread_id = ?1 AND t.finished_ms IS NULL \
                 ORDER BY t.seq",
            )
            .db("read open tool calls")?
            .query_map([thread], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .db("read open tool calls")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read open tool calls")?;
        for (id, name, run, expires, holder) in tools {
            if expires > now && self.inner.holder.is_alive(c, &holder) {
                return Ok(Some(format!(
                    "tool call {id} ({name}) of run {run} is under way; queued prompts are \
                     delivered once it finishes"
                )));
            }
        }
        Ok(None)
    }

    /// Delivers the oldest prompt queued in `thread`'s inbox if the thread is at a safe
    /// boundary: its checkpoint is taken now (as [`Threads::append`] takes one before a user
    /// message: the run's workspace and policy, else `opts.workspace` with the runtime's), then
    /// in one transaction the prompt is appended as a user entry under its admission key and
    /// marked delivered. Under way, nothing is delivered and [`Delivery::waiting`] says why;
    /// with nothing queued, nothing is done.
    ///
    /// A checkpoint that is due and fails leaves the prompt queued with the error recorded
    /// ([`Admission::error`]) and returns it: nothing is sent without its checkpoint, and
    /// delivering again retries.
    pub fn deliver(&self, thread: &ThreadId, opts: &DeliverOptions) -> Result<Delivery> {
        let mut append = AppendOptions {
            run: opts.run.clone(),
            workspace: opts.workspace.clone(),
            key: None,
            wait: opts.wait,
            files_of: None,
        };
        self.check_append(thread, &NewEntry::user(Vec::new()), &append)?;
        let own = opts.run.as_ref().map(|r| r.id().clone());
        let (waiting, queued, next) = self.inner.read(|c| {
            require_thread(c, thread)?;
            self.check_not_held(c, thread)?;
            let next = c
                .query_row(
                    &format!(
                        "SELECT {INBOX_COLS} FROM inbox WHERE thread_id = ?1 AND state = 'queued' \
                         ORDER BY seq LIMIT 1"
                    ),
                    [thread],
                    admission_row,
                )
                .optional()
                .db("read the inbox")?;
            Ok((
                self.under_way_in(c, thread, own.as_ref())?,
                queued_count(c, thread)?,
                next,
            ))
        })?;
        let nothing = |waiting: Option<String>, queued: u64| Delivery {
            delivered: None,
            entry: None,
            checkpoint: None,
            waiting,
            queued,
        };
        let Some(prompt) = next.filter(|_| waiting.is_none()) else {
            return Ok(nothing(waiting, queued));
        };
        let key = prompt.key.clone();
        append.key = Some(key.clone());
        let entry = NewEntry {
            kind: EntryKind::User,
            payload: prompt.payload.clone(),
            metadata: prompt.metadata.clone(),
        };
        let entry_id = EntryId::generate();
        let guard = self.inner.begin_op(format!("admit:{entry_id}"))?;
        let queued_now = |this: &Self| this.inner.read(|c| queued_count(c, thread));
        match self.admit_key(thread, &key, &entry_id, &guard.op, append.wait) {
            Ok(None) => {}
            Ok(Some(first)) => {
                // Appended already under this key (an append, or another delivery): that
                // entry is the prompt's.
                let delivered = self.inner.write("deliver a queued prompt", |c| {
                    mark_delivered(c, thread, &key, &first.entry.id, first.checkpoint.as_ref())
                })?;
                return Ok(Delivery {
                    delivered,
                    entry: Some(first.entry),
                    checkpoint: first.checkpoint,
                    waiting: None,
                    queued: queued_now(self)?,
                });
            }
            Err(e) => {
                // A rewind may have cancelled it since it was read.
                let now = self.inner.read(|c| load_admission(c, thread, &key))?;
                if now.is_some_and(|a| a.state != PromptState::Queued) {
                    return Ok(nothing(None, queued_now(self)?));
                }
                return Err(e);
            }
        }
        let (checkpoint, failure) = self.checkpoint_before(thread, &entry, &append, &entry_id);
        if let Some(failure) = failure {
            self.release_admission(thread, &key, &guard.op);
            let ws = append
                .run
                .as_ref()
                .and_then(|r| r.shared.workspace.clone())
                .or_else(|| append.workspace.clone());
            let message = failure.message.clone();
            self.inner.write("record a delivery's failure", |c| {
                c.execute(
                    "UPDATE inbox SET error = ?3 WHERE thread_id = ?1 AND key = ?2 AND state = 'queued'",
                    params![thread, key, message],
                )
                .db("record a delivery's failure")
                .map(|_| ())
            })?;
            return Err(Error::files(
                ws.as_ref().map(|w| w.id()).unwrap_or_default(),
                "take the checkpoint of a queued prompt (it stays queued: deliver again once \
                 the workspace is fixed)",
                FilesError::msg(failure.kind, failure.message),
            ));
        }
        let outcome = self.inner.write("deliver a queued prompt", |c| {
            // Again where the entry is written: still queued, still at a safe boundary.
            if load_admission(c, thread, &key)?.map(|a| a.state) != Some(PromptState::Queued) {
                return Ok(Outcome::Gone);
            }
            if let Some(w) = self.under_way_in(c, thread, own.as_ref())? {
                return Ok(Outcome::Waiting(w));
            }
            let appended =
                self.insert_appended(c, thread, &entry, &append, &entry_id, checkpoint, None)?;
            let admission =
                mark_delivered(c, thread, &key, &entry_id, appended.checkpoint.as_ref())?
                    .ok_or_else(|| {
                        Error::not_found(format!("admission '{key}'"), "it was just read")
                    })?;
            Ok(Outcome::Delivered(Box::new(appended), Box::new(admission)))
        });
        let outcome = match outcome {
            Ok(Outcome::Delivered(appended, admission)) => (appended, admission),
            other => {
                self.release_admission(thread, &key, &guard.op);
                return match other? {
                    Outcome::Waiting(w) => Ok(nothing(Some(w), queued_now(self)?)),
                    _ => Ok(nothing(None, queued_now(self)?)),
                };
            }
        };
        drop(guard);
        let (appended, admission) = outcome;
        Ok(Delivery {
            delivered: Some(*admission),
            entry: Some(appended.entry),
            checkpoint: appended.checkpoint,
            waiting: None,
            queued: queued_now(self)?,
        })
    }
}

/// The entry appended in `thread` under admission key `key` (with [`Threads::append`]), if any.
fn appended_with_key(c: &Conn<'_>, thread: &ThreadId, key: &str) -> Result<Option<Entry>> {
    let id: Option<EntryId> = c
        .query_row(
            "SELECT entry_id FROM admissions WHERE thread_id = ?1 AND key = ?2 AND state = 'done'",
            params![thread, key],
            |r| r.get(0),
        )
        .optional()
        .db("read an admission")?;
    match id {
        Some(id) => load_entry(c, &id),
        None => Ok(None),
    }
}

/// Marks the queued prompt `key` delivered as `entry` (with its `checkpoint`), with its event;
/// the admission as it is then (`None` when the key was never queued).
fn mark_delivered(
    c: &Conn<'_>,
    thread: &ThreadId,
    key: &str,
    entry: &EntryId,
    checkpoint: Option<&Checkpoint>,
) -> Result<Option<Admission>> {
    let cp = checkpoint.map(|cp| &cp.id);
    let n = c
        .execute(
            "UPDATE inbox SET state = 'delivered', entry_id = ?3, checkpoint_id = ?4, error = NULL, \
             done_ms = ?5 WHERE thread_id = ?1 AND key = ?2 AND state = 'queued'",
            params![thread, key, entry, cp, c.now_ms()],
        )
        .db("deliver a queued prompt")?;
    if n > 0 {
        emit(
            c,
            Some(thread),
            EventKind::PromptDelivered,
            serde_json::json!({"key": key, "entry_id": entry, "checkpoint_id": cp}),
        )?;
    }
    load_admission(c, thread, key)
}
