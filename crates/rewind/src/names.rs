//! Names a thread is also found by (issue 54): an agent whose conversation a rewind forks into
//! a new session of its own (Claude Code's `--fork-session`) names the thread after that
//! session, so the new session's hooks find the rewound thread instead of starting another.
//!
//! A rewind carries them in its [`Continuation`]: they are checked with the rewind's other
//! checks, kept in its record before any file changes, and written (table `thread_names`) in
//! the transaction that completes it, by the rewind itself or by the recovery that finishes it
//! after a crash. A name is never the id of a thread, and belongs to one thread only.

use crate::error::{DbResult, Error, Result};
use crate::ids::ThreadId;
use crate::rows::{load_thread, require_thread, thread_exists};
use crate::sql::{params, Conn, OptionalExtension};
use crate::threads::Threads;
use serde::{Deserialize, Serialize};

/// What an agent needs to continue its own conversation from a rewind's point: its
/// "conversation half", which a rewind keeps in its journal and completes with the files.
///
/// Pass it in [`crate::RewindOptions::continuation`]; the rewind's report
/// ([`crate::RewindReport::continuation`]) and record ([`crate::RewindRecord::continuation`])
/// give `data` back, also when the rewind is finished by recovery after a crash or repeated
/// with its idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Continuation {
    /// What the agent needs to continue its conversation from the rewind's point (for Claude
    /// Code: the session, the message to resume at, the new session's id). Opaque to this
    /// crate: kept and given back as it is.
    pub data: serde_json::Value,
    /// Names under which the thread is found from the rewind on, by [`Threads::resolve`]
    /// (e.g. `claude-<new session id>`): each of the form of a thread id, none the id of a
    /// thread or a name of another thread (the rewind is refused with `VALIDATION`). A name
    /// the thread already has is fine.
    #[serde(default)]
    pub names: Vec<ThreadId>,
}

impl Threads {
    /// The thread `name` stands for: the thread itself when a thread has that id, else the
    /// thread a rewind's [`Continuation`] gave that name to. Neither: `NOT_FOUND`.
    pub fn resolve(&self, name: &ThreadId) -> Result<ThreadId> {
        self.inner.read(|c| {
            if let Some(t) = load_thread(c, name)? {
                return Ok(t.id);
            }
            match name_owner(c, name)? {
                Some(owner) => Ok(require_thread(c, &owner)?.id),
                // The usual NOT_FOUND of a thread.
                None => require_thread(c, name).map(|t| t.id),
            }
        })
    }

    /// The names `thread` is also found by ([`Threads::resolve`]), oldest first (those given
    /// by one rewind in name order). A thread that does not exist: `NOT_FOUND`.
    pub fn names(&self, thread: &ThreadId) -> Result<Vec<ThreadId>> {
        self.inner.read(|c| {
            require_thread(c, thread)?;
            c.prepare(
                "SELECT name FROM thread_names WHERE thread_id = ?1 ORDER BY created_ms, name",
            )
            .db("read the thread's names")?
            .query_map([thread], |r| r.get(0))
            .db("read the thread's names")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read the thread's names")
        })
    }
}

/// The thread `name` was given to, if any.
pub(crate) fn name_owner(c: &Conn<'_>, name: &ThreadId) -> Result<Option<ThreadId>> {
    c.query_row(
        "SELECT thread_id FROM thread_names WHERE name = ?1",
        [name],
        |r| r.get(0),
    )
    .optional()
    .db("look up a thread name")
}

/// Refuses (`VALIDATION`) an id for a new thread that names a thread already, as its id or as
/// a name a rewind gave it: a name and an id never stand for two threads.
pub(crate) fn check_id_free(c: &Conn<'_>, id: &ThreadId) -> Result<()> {
    if thread_exists(c, id)? {
        return Err(crate::threads::thread_exists_error(id));
    }
    match name_owner(c, id)? {
        Some(owner) => Err(Error::validation(
            format!(
                "{id} is a name of thread {owner} (given by a rewind that continued its conversation); \
                 choose another id, or use thread {owner}"
            ),
            Some(id.to_string()),
        )),
        None => Ok(()),
    }
}

/// The names a rewind's continuation gives (none without one).
pub(crate) fn names_of(continuation: Option<&Continuation>) -> &[ThreadId] {
    continuation.map_or(&[], |k| &k.names)
}

/// Checks the names a rewind of `thread` would give it: each of the form of a thread id, not
/// the id of a thread, not a name of another thread, and not promised to another thread by a
/// rewind in flight. A name `thread` has already is fine.
pub(crate) fn check_names(c: &Conn<'_>, thread: &ThreadId, names: &[ThreadId]) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let in_flight = crate::rewind::unfinished_continuations(c)?;
    for name in names {
        name.check()?;
        let owner = name_owner(c, name)?;
        let promised = in_flight
            .iter()
            .find(|(_, t, other)| t != thread && names_of(other.as_ref()).contains(name));
        let why = if thread_exists(c, name)? {
            if name == thread {
                format!("{name} is the id of the thread itself")
            } else {
                format!("{name} is the id of another thread")
            }
        } else if let Some(owner) = owner.filter(|o| o != thread) {
            format!("{name} is already a name of thread {owner}")
        } else if let Some((rewind, owner, _)) = promised {
            format!(
                "rewind {rewind} of thread {owner}, not finished, gives {name} to thread {owner} \
                 (finish it with `cairn recover`)"
            )
        } else {
            continue;
        };
        return Err(Error::validation(
            format!(
                "the rewind of thread {thread} cannot give it the name {name}: {why}; nothing was changed: \
                 choose another name for the continued conversation"
            ),
            Some(name.to_string()),
        ));
    }
    Ok(())
}

/// Gives `thread` `names` (in the transaction that completes its rewind). A name given since
/// the rewind's checks to another thread stays that thread's.
pub(crate) fn record_names(c: &Conn<'_>, thread: &ThreadId, names: &[ThreadId]) -> Result<()> {
    let now = c.now_ms();
    for name in names {
        c.execute(
            "INSERT INTO thread_names (name, thread_id, created_ms) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO NOTHING",
            params![name, thread, now],
        )
        .db("record the thread's names")?;
    }
    Ok(())
}
