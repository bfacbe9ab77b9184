//! Checking the thread database: `cairn verify` runs it beside the store's check.

use crate::error::{DbResult, Result};
use crate::sql::Conn;
use crate::threads::Threads;

/// What [`Threads::check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DbCheck {
    /// What SQLite's `PRAGMA integrity_check` reported other than `ok` (not run on
    /// PostgreSQL, which checks its own pages).
    pub integrity: Vec<String>,
    /// Entries whose checkpoint names no checkpoint of the database (at most 100 listed).
    pub entries_without_checkpoint: Vec<String>,
    /// Entries whose parent names no entry (at most 100 listed).
    pub entries_without_parent: Vec<String>,
    /// Threads whose active leaf names no entry (at most 100 listed).
    pub threads_without_leaf: Vec<String>,
}

impl DbCheck {
    /// Whether nothing was found.
    pub fn ok(&self) -> bool {
        self.integrity.is_empty()
            && self.entries_without_checkpoint.is_empty()
            && self.entries_without_parent.is_empty()
            && self.threads_without_leaf.is_empty()
    }
}

fn ids(c: &Conn<'_>, sql: &str) -> Result<Vec<String>> {
    c.rows(sql, ())
        .db("check the thread database")?
        .iter()
        .map(|r| r.get::<_, String>(0).db("check the thread database"))
        .collect()
}

impl Threads {
    /// Checks the database: its pages (SQLite's `integrity_check`), and that every reference
    /// between its records (an entry's checkpoint and parent, a thread's active leaf) names a
    /// record that is there. Changes nothing.
    pub fn check(&self) -> Result<DbCheck> {
        self.inner.read(|c| {
            let integrity = match c {
                Conn::Sqlite(_) => ids(c, "PRAGMA integrity_check")?
                    .into_iter()
                    .filter(|l| l != "ok")
                    .collect(),
                Conn::Pg(_) => Vec::new(),
            };
            Ok(DbCheck {
                integrity,
                entries_without_checkpoint: ids(
                    c,
                    "SELECT e.id FROM entries e LEFT JOIN checkpoints k ON k.id = e.checkpoint_id \
                     WHERE e.checkpoint_id IS NOT NULL AND k.id IS NULL ORDER BY e.id LIMIT 100",
                )?,
                entries_without_parent: ids(
                    c,
                    "SELECT e.id FROM entries e LEFT JOIN entries p ON p.id = e.parent_id \
                     WHERE e.parent_id IS NOT NULL AND p.id IS NULL ORDER BY e.id LIMIT 100",
                )?,
                threads_without_leaf: ids(
                    c,
                    "SELECT t.id FROM threads t LEFT JOIN entries e ON e.id = t.active_leaf \
                     WHERE t.active_leaf IS NOT NULL AND e.id IS NULL ORDER BY t.id LIMIT 100",
                )?,
            })
        })
    }
}
