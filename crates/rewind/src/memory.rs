//! Memory items and the entries they stand on.
//!
//! An item stands on entries of its thread's lineage. A rewind makes the items that stood only
//! on the entries it cut `stale` (reason `rewound`). A summary is seen only from a branch that
//! holds every entry it stands on, so the summaries of a branch left behind are not seen from
//! the new one.

use crate::error::{DbResult, Error, Result};
use crate::ids::{EntryId, MemoryId, ThreadId};
use crate::lineage::Lineage;
use crate::model::{MemoryItem, MemoryKind, MemoryStatus, NewMemory};
use crate::rows::require_thread;
use crate::sql::{params, Conn, OptionalExtension};
use crate::threads::Threads;
use std::collections::HashSet;

const MEMORY_COLS: &str =
    "m.id, m.thread_id, m.kind, m.text, m.payload, m.status, m.stale_reason, m.stale_rewind, m.created_ms";

fn memory_row(c: &Conn<'_>, r: &crate::sql::Row) -> crate::sql::SqlResult<MemoryItem> {
    let id: MemoryId = r.get(0)?;
    let kind: String = r.get(2)?;
    let status: String = r.get(5)?;
    let stands_on = c
        .prepare(
            "SELECT me.entry_id FROM memory_entries me JOIN entries e ON e.id = me.entry_id \
             WHERE me.item_id = ?1 ORDER BY e.seq",
        )?
        .query_map([&id], |r| r.get(0))?
        .collect::<crate::sql::SqlResult<Vec<EntryId>>>()?;
    Ok(MemoryItem {
        id,
        thread_id: r.get(1)?,
        kind: if kind == "summary" {
            MemoryKind::Summary
        } else {
            MemoryKind::Item
        },
        text: r.get(3)?,
        payload: r.get(4)?,
        stands_on,
        status: if status == "stale" {
            MemoryStatus::Stale {
                reason: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
                rewind_id: r.get(7)?,
            }
        } else {
            MemoryStatus::Active
        },
        created_ms: r.get(8)?,
    })
}

fn items_of(c: &Conn<'_>, thread: &ThreadId) -> Result<Vec<MemoryItem>> {
    let stmt = c
        .prepare(&format!(
            "SELECT {MEMORY_COLS} FROM memory_items m WHERE m.thread_id = ?1 ORDER BY m.seq"
        ))
        .db("read memory")?;
    let rows = stmt
        .query_map([thread], |r| memory_row(c, r))
        .db("read memory")?
        .collect::<crate::sql::SqlResult<Vec<_>>>()
        .db("read memory")?;
    Ok(rows)
}

impl Threads {
    /// Adds a memory item standing on entries of the thread's lineage.
    pub fn add_memory(&self, thread: &ThreadId, item: NewMemory) -> Result<MemoryItem> {
        let id = MemoryId::generate();
        self.inner.write("add a memory item", |c| {
            let lin = Lineage::load(c, thread)?;
            for e in &item.stands_on {
                if !lin.entries.contains_key(e) {
                    return Err(Error::validation(
                        format!("entry {e} is not in the lineage of thread {thread}; a memory item stands only on entries its thread sees"),
                        Some(e.to_string()),
                    ));
                }
            }
            c.execute(
                "INSERT INTO memory_items (id, thread_id, kind, text, payload, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    id,
                    thread,
                    if item.kind == MemoryKind::Summary { "summary" } else { "item" },
                    item.text,
                    item.payload,
                    c.now_ms()
                ],
            )
            .db("add a memory item")?;
            for e in &item.stands_on {
                c.execute(
                    "INSERT INTO memory_entries (item_id, entry_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                    params![id, e],
                )
                .db("add a memory item")?;
            }
            load_memory(c, &id)
        })
    }

    /// The memory seen from the thread's active branch: its active items, and the active items
    /// of the threads it was forked from that stand on entries it shares; summaries only when
    /// every entry they stand on is on the active branch.
    pub fn memory(&self, thread: &ThreadId) -> Result<Vec<MemoryItem>> {
        self.inner.read(|c| {
            let lin = Lineage::load(c, thread)?;
            let active: HashSet<&EntryId> = lin.active.iter().collect();
            let mut out = Vec::new();
            for (t, _) in &lin.threads {
                let own = t == thread;
                for item in items_of(c, t)? {
                    if item.status != MemoryStatus::Active {
                        continue;
                    }
                    let on_branch = item.stands_on.iter().all(|e| active.contains(e));
                    let visible = match (own, item.kind) {
                        (true, MemoryKind::Item) => true,
                        (true, MemoryKind::Summary) => on_branch,
                        (false, _) => !item.stands_on.is_empty() && on_branch,
                    };
                    if visible {
                        out.push(item);
                    }
                }
            }
            out.sort_by_key(|m| m.created_ms);
            Ok(out)
        })
    }

    /// Every memory item of the thread itself, stale ones included, oldest first.
    pub fn memory_items(&self, thread: &ThreadId) -> Result<Vec<MemoryItem>> {
        self.inner.read(|c| {
            require_thread(c, thread)?;
            items_of(c, thread)
        })
    }

    /// A memory item.
    pub fn memory_item(&self, id: &MemoryId) -> Result<MemoryItem> {
        self.inner.read(|c| load_memory(c, id))
    }
}

fn load_memory(c: &Conn<'_>, id: &MemoryId) -> Result<MemoryItem> {
    c.query_row(
        &format!("SELECT {MEMORY_COLS} FROM memory_items m WHERE m.id = ?1"),
        [id],
        |r| memory_row(c, r),
    )
    .optional()
    .db("read a memory item")?
    .ok_or_else(|| Error::not_found(format!("memory item {id}"), "list them with memory_items()"))
}

/// The active items of `thread` that stand only on entries of `cut` (and on at least one).
pub(crate) fn stale_candidates(
    c: &Conn<'_>,
    thread: &ThreadId,
    cut: &[EntryId],
) -> Result<Vec<MemoryId>> {
    if cut.is_empty() {
        return Ok(Vec::new());
    }
    let cut: HashSet<&EntryId> = cut.iter().collect();
    Ok(items_of(c, thread)?
        .into_iter()
        .filter(|m| m.status == MemoryStatus::Active && !m.stands_on.is_empty())
        .filter(|m| m.stands_on.iter().all(|e| cut.contains(e)))
        .map(|m| m.id)
        .collect())
}

/// Marks items stale because a rewind cut what they stood on.
pub(crate) fn mark_stale(c: &Conn<'_>, ids: &[MemoryId], rewind: &str) -> Result<()> {
    for id in ids {
        c.execute(
            "UPDATE memory_items SET status = 'stale', stale_reason = 'rewound', stale_rewind = ?2 WHERE id = ?1",
            params![id, rewind],
        )
        .db("mark memory stale")?;
    }
    Ok(())
}
