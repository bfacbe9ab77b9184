//! A thread's lineage in memory: the entries it sees, its active branch, the threads it was
//! forked from, and the rules that pick and check the checkpoint at a point.

use crate::error::{DbResult, Error, Result};
use crate::ids::{CheckpointId, EntryId, ThreadId};
use crate::model::{Checkpoint, EntryKind, Thread};
use crate::rows::{conv, load_checkpoint, require_thread, BadValue, CHECKPOINT_COLS};
use crate::sql::{params, Conn, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// An entry without its payload.
#[derive(Debug, Clone)]
pub(crate) struct Lite {
    pub(crate) parent_id: Option<EntryId>,
    pub(crate) kind: EntryKind,
    pub(crate) seq: i64,
    pub(crate) checkpoint_id: Option<CheckpointId>,
    /// What the entry's metadata says under `file_checkpoint` (the caller's word).
    pub(crate) meta_cp: Option<serde_json::Value>,
}

impl Lite {
    fn names_checkpoint(&self) -> bool {
        self.checkpoint_id.is_some() || self.meta_cp.is_some()
    }
}

/// What a thread sees.
#[derive(Debug)]
pub(crate) struct Lineage {
    pub(crate) thread: Thread,
    pub(crate) file_checkpoint_at: Option<CheckpointId>,
    /// The thread, then the threads it was forked from, each with the last checkpoint (by
    /// sequence) the fork below it may see; `None` for the thread itself.
    pub(crate) threads: Vec<(ThreadId, Option<i64>)>,
    pub(crate) entries: HashMap<EntryId, Lite>,
    pub(crate) children: HashMap<EntryId, Vec<EntryId>>,
    /// The active branch, first entry first.
    pub(crate) active: Vec<EntryId>,
}

/// A checkpoint picked for a point, before it is checked.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// The entry whose checkpoint it is.
    pub(crate) entry_id: Option<EntryId>,
    pub(crate) checkpoint_id: Option<CheckpointId>,
    pub(crate) meta: Option<serde_json::Value>,
    pub(crate) exact: bool,
    /// Named by its id (a fork's `file_checkpoint_at`, or a checkpoint the caller chose), not
    /// through an entry's reference.
    pub(crate) by_id: bool,
}

/// The checkpoint whose files a rewind or fork restores, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ChosenFiles {
    pub(crate) checkpoint_id: CheckpointId,
    pub(crate) snapshot_id: cairn_store::SnapshotId,
    pub(crate) entry_id: Option<EntryId>,
    pub(crate) exact: bool,
    pub(crate) workspace_id: String,
    #[serde(with = "crate::model::path_text")]
    pub(crate) root: PathBuf,
    /// Which paths, and the drift check (default: every path, none).
    #[serde(default)]
    pub(crate) scope: cairn_restore::PlanOptions,
}

impl Lineage {
    pub(crate) fn load(c: &Conn<'_>, id: &ThreadId) -> Result<Lineage> {
        let thread = require_thread(c, id)?;
        let file_checkpoint_at: Option<CheckpointId> = c
            .query_row(
                "SELECT file_checkpoint_at FROM threads WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .db("read a thread")?;
        let mut threads = vec![(thread.id.clone(), None)];
        let mut cur = thread.id.clone();
        let mut seen = HashSet::from([cur.clone()]);
        loop {
            let row: Option<(Option<ThreadId>, Option<i64>)> = c
                .query_row(
                    "SELECT parent_thread, fork_checkpoint_seq FROM threads WHERE id = ?1",
                    [&cur],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .db("read a thread's lineage")?;
            match row {
                Some((Some(parent), horizon)) if seen.insert(parent.clone()) => {
                    threads.push((parent.clone(), Some(horizon.unwrap_or(i64::MAX))));
                    cur = parent;
                }
                _ => break,
            }
        }
        let sql = format!(
            "WITH RECURSIVE prefix(id) AS ( \
               SELECT CAST(?2 AS TEXT) WHERE CAST(?2 AS TEXT) IS NOT NULL \
               UNION ALL SELECT p.parent_id FROM entries p JOIN prefix ON p.id = prefix.id \
                 WHERE p.parent_id IS NOT NULL) \
             SELECT e.id, e.thread_id, e.parent_id, e.kind, e.seq, e.checkpoint_id, \
               {} \
             FROM entries e WHERE e.thread_id = ?1 OR e.id IN (SELECT id FROM prefix)",
            c.json_field("e.metadata", crate::model::FILE_CHECKPOINT_KEY)
        );
        let mut entries = HashMap::new();
        let mut children: HashMap<EntryId, Vec<EntryId>> = HashMap::new();
        let rows = c
            .prepare(&sql)
            .db("read a thread's lineage")?
            .query_map(params![thread.id, thread.fork_entry], |r| {
                let kind: String = r.get(3)?;
                let meta: Option<String> = r.get(6)?;
                let meta_cp = match meta {
                    Some(text) => Some(conv(6, serde_json::from_str(&text))?),
                    None => None,
                };
                Ok((
                    r.get::<_, EntryId>(0)?,
                    Lite {
                        parent_id: r.get(2)?,
                        kind: conv(3, EntryKind::parse(&kind).ok_or(BadValue(kind.clone())))?,
                        seq: r.get(4)?,
                        checkpoint_id: r.get(5)?,
                        meta_cp,
                    },
                ))
            })
            .db("read a thread's lineage")?
            .collect::<crate::sql::SqlResult<Vec<_>>>()
            .db("read a thread's lineage")?;
        for (id, lite) in rows {
            if let Some(p) = &lite.parent_id {
                children.entry(p.clone()).or_default().push(id.clone());
            }
            entries.insert(id, lite);
        }
        let mut active = Vec::new();
        let mut cur = thread.active_leaf.clone();
        while let Some(id) = cur {
            cur = entries.get(&id).and_then(|l| l.parent_id.clone());
            active.push(id);
            if active.len() > entries.len() + 1 {
                break;
            }
        }
        active.reverse();
        Ok(Lineage {
            thread,
            file_checkpoint_at,
            threads,
            entries,
            children,
            active,
        })
    }

    /// Whether `id` is on the active branch.
    pub(crate) fn on_active(&self, id: &EntryId) -> bool {
        self.active.contains(id)
    }

    /// The exact checkpoint at `point`: the checkpoint of a user message right after it (only
    /// notes and session events between), looked for on every branch, the one written last
    /// when there are several; else, at a fork's point, the checkpoint the fork names.
    pub(crate) fn exact_at(&self, point: &EntryId) -> Option<Candidate> {
        let mut best: Option<(&EntryId, &Lite)> = None;
        let mut queue: Vec<&EntryId> = self
            .children
            .get(point)
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let mut seen = HashSet::new();
        while let Some(id) = queue.pop() {
            if !seen.insert(id) {
                continue;
            }
            let Some(lite) = self.entries.get(id) else {
                continue;
            };
            if lite.kind == EntryKind::User {
                if lite.names_checkpoint() && best.is_none_or(|(_, b)| lite.seq > b.seq) {
                    best = Some((id, lite));
                }
            } else if lite.kind.is_between_turns() {
                if let Some(kids) = self.children.get(id) {
                    queue.extend(kids.iter());
                }
            }
        }
        if let Some((id, lite)) = best {
            return Some(Candidate {
                entry_id: Some(id.clone()),
                checkpoint_id: lite.checkpoint_id.clone(),
                meta: lite.meta_cp.clone(),
                exact: true,
                by_id: false,
            });
        }
        if self.thread.fork_entry.as_ref() == Some(point) {
            if let Some(cp) = &self.file_checkpoint_at {
                return Some(Candidate {
                    entry_id: None,
                    checkpoint_id: Some(cp.clone()),
                    meta: None,
                    exact: true,
                    by_id: true,
                });
            }
        }
        None
    }

    /// The checkpoint of the nearest user message at or before `point`.
    pub(crate) fn before(&self, point: &EntryId) -> Option<Candidate> {
        let mut cur = Some(point);
        let mut steps = 0;
        while let Some(id) = cur {
            let lite = self.entries.get(id)?;
            if lite.kind == EntryKind::User && lite.names_checkpoint() {
                return Some(Candidate {
                    entry_id: Some(id.clone()),
                    checkpoint_id: lite.checkpoint_id.clone(),
                    meta: lite.meta_cp.clone(),
                    exact: false,
                    by_id: false,
                });
            }
            cur = lite.parent_id.as_ref();
            steps += 1;
            if steps > self.entries.len() {
                break;
            }
        }
        None
    }

    /// The checkpoint at `point`: exact if there is one, else the nearest before.
    pub(crate) fn at(&self, point: &EntryId) -> Option<Candidate> {
        self.exact_at(point).or_else(|| self.before(point))
    }

    /// The candidate for an entry's own checkpoint (a restore before that message).
    pub(crate) fn of_entry(&self, id: &EntryId) -> Option<Candidate> {
        let lite = self.entries.get(id)?;
        lite.names_checkpoint().then(|| Candidate {
            entry_id: Some(id.clone()),
            checkpoint_id: lite.checkpoint_id.clone(),
            meta: lite.meta_cp.clone(),
            exact: true,
            by_id: false,
        })
    }

    /// Whether a checkpoint belongs to this thread's lineage: taken in it, or in a thread it was
    /// forked from before the fork and at an entry it shares, or named at its fork point.
    pub(crate) fn holds_checkpoint(&self, cp: &Checkpoint, seq: i64) -> bool {
        if self.file_checkpoint_at.as_ref() == Some(&cp.id) {
            return true;
        }
        let Some((_, horizon)) = self.threads.iter().find(|(t, _)| *t == cp.thread_id) else {
            return false;
        };
        let own = horizon.is_none();
        if let Some(h) = horizon {
            if seq > *h {
                return false;
            }
        }
        match &cp.entry_id {
            Some(e) => self.entries.contains_key(e),
            None => own,
        }
    }

    /// Every checkpoint of the lineage, oldest first.
    pub(crate) fn checkpoints(&self, c: &Conn<'_>) -> Result<Vec<Checkpoint>> {
        let mut out = Vec::new();
        let stmt = c
            .prepare(&format!(
                "SELECT {CHECKPOINT_COLS} FROM checkpoints c WHERE c.thread_id = ?1 ORDER BY c.seq"
            ))
            .db("list checkpoints")?;
        let mut all: Vec<(Checkpoint, i64)> = Vec::new();
        for (t, _) in &self.threads {
            let rows = stmt
                .query_map([t], |r| {
                    Ok((crate::rows::checkpoint_row(r)?, r.get::<_, i64>(10)?))
                })
                .db("list checkpoints")?
                .collect::<crate::sql::SqlResult<Vec<_>>>()
                .db("list checkpoints")?;
            all.extend(rows);
        }
        if let Some(id) = &self.file_checkpoint_at {
            if !all.iter().any(|(cp, _)| &cp.id == id) {
                if let Some(cp) = load_checkpoint(c, id)? {
                    let seq = checkpoint_seq(c, id)?;
                    all.push((cp, seq));
                }
            }
        }
        all.sort_by_key(|(_, seq)| *seq);
        for (cp, seq) in all {
            if self.holds_checkpoint(&cp, seq) {
                out.push(cp);
            }
        }
        Ok(out)
    }

    /// Whether the thread (or a thread it was forked from) ran in, or took checkpoints of,
    /// the workspace `id` at `root`.
    pub(crate) fn ran_in(&self, c: &Conn<'_>, id: &str) -> Result<bool> {
        // The workspace id is what the workspace is: it follows the root's directory through a
        // rename or a bind mount (and `cairn workspace adopt`), so a thread that ran in the
        // workspace under another path ran in this one.
        for (t, _) in &self.threads {
            let hit = c
                .query_row(
                    "SELECT 1 FROM thread_workspaces WHERE thread_id = ?1 AND workspace_id = ?2",
                    params![t, id],
                    |_| Ok(()),
                )
                .optional()
                .db("read a thread's workspaces")?;
            if hit.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Checks a candidate against the checkpoints this layer recorded and the workspace to
    /// restore: a reference forged into metadata, one of another lineage, or a workspace the
    /// thread never ran in is refused with `VALIDATION`. Whether the workspace still keeps the
    /// snapshot is checked by the caller, outside the database.
    pub(crate) fn check(
        &self,
        c: &Conn<'_>,
        cand: &Candidate,
        workspace_id: &str,
        root: &Path,
    ) -> Result<ChosenFiles> {
        let entry_text = cand
            .entry_id
            .as_ref()
            .map(|e| format!("entry {e}"))
            .unwrap_or_else(|| format!("the fork point of thread {}", self.thread.id));
        let forged = || {
            Error::validation(
                format!(
                    "{entry_text} names a checkpoint in its metadata that Cairn did not take for it; \
                     it cannot be restored: rewind to another point, or without files"
                ),
                cand.entry_id.as_ref().map(|e| e.to_string()),
            )
        };
        let Some(id) = &cand.checkpoint_id else {
            return Err(forged());
        };
        let Some(cp) = load_checkpoint(c, id)? else {
            return Err(forged());
        };
        if let Some(meta) = &cand.meta {
            if !meta_matches(meta, &cp) {
                return Err(forged());
            }
        }
        if !cand.by_id && cp.entry_id != cand.entry_id {
            return Err(forged());
        }
        let seq = checkpoint_seq(c, id)?;
        if !self.holds_checkpoint(&cp, seq) {
            return Err(Error::validation(
                format!(
                    "checkpoint {} was taken in thread {}, which is not in the lineage of thread {}; \
                     restore only checkpoints of this thread or of the threads it was forked from",
                    cp.id, cp.thread_id, self.thread.id
                ),
                Some(cp.id.to_string()),
            ));
        }
        if !self.ran_in(c, workspace_id)? {
            return Err(Error::validation(
                format!(
                    "thread {} never ran in workspace {workspace_id} ({}); restore into a workspace the thread ran in",
                    self.thread.id,
                    root.display()
                ),
                Some(workspace_id.to_string()),
            ));
        }
        Ok(ChosenFiles {
            checkpoint_id: cp.id,
            snapshot_id: cp.snapshot_id,
            entry_id: if cand.by_id {
                cp.entry_id
            } else {
                cand.entry_id.clone()
            },
            exact: cand.exact,
            workspace_id: workspace_id.to_string(),
            root: root.to_path_buf(),
            scope: Default::default(),
        })
    }
}

pub(crate) fn checkpoint_seq(c: &Conn<'_>, id: &CheckpointId) -> Result<i64> {
    c.query_row("SELECT seq FROM checkpoints WHERE id = ?1", [id], |r| {
        r.get(0)
    })
    .db("read a checkpoint")
}

/// Whether what an entry's metadata says about its checkpoint is what was recorded.
fn meta_matches(meta: &serde_json::Value, cp: &Checkpoint) -> bool {
    let field = |k: &str| meta.get(k).and_then(|v| v.as_str());
    field("snapshot_id") == Some(cp.snapshot_id.to_hex().as_str())
        && field("checkpoint_id").is_none_or(|v| v == cp.id.as_str())
        && field("workspace_id").is_none_or(|v| v == cp.workspace_id)
}
