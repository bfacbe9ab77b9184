//! The workspace as every step of a restore sees it: the root, the workspace id, the store,
//! the stat cache between calls, and the files Cairn keeps beneath the root. The
//! [`crate::Workspace`] owns one; planning, the executor, the journal and the apply take it, so
//! none of them depends on the workspace's own methods (which call them).

use cairn_store::Store;
use std::path::{Path, PathBuf};

/// What planning, applying and recovering a restore work on.
#[derive(Debug)]
pub(crate) struct Site {
    /// The canonical root.
    pub(crate) root: PathBuf,
    /// The workspace id.
    pub(crate) id: String,
    /// The store.
    pub(crate) store: Store,
    /// The stat cache between this handle's snapshots and plans.
    pub(crate) memo: cairn_snapshot::CacheMemo,
    /// Files Cairn keeps that may lie beneath the root ([`crate::Workspace::keep_out`]).
    pub(crate) own_files: parking_lot::Mutex<Vec<PathBuf>>,
}

impl Site {
    /// The canonical root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The files [`crate::Workspace::keep_out`] named.
    pub(crate) fn own_files(&self) -> Vec<PathBuf> {
        self.own_files.lock().clone()
    }

    /// `ctx` with this workspace's stat cache kept in memory, unless it brings one: what
    /// every walk of the workspace (a snapshot, a plan's scan) is given.
    pub(crate) fn walk_context<'a>(
        &self,
        mut ctx: cairn_snapshot::Context<'a>,
    ) -> cairn_snapshot::Context<'a> {
        ctx.memo.get_or_insert_with(|| self.memo.clone());
        ctx
    }

    /// The lock a restore of the workspace holds while it runs (a hold takes it shared).
    pub(crate) fn restore_lock_path(&self) -> PathBuf {
        self.store
            .layout()
            .locks
            .join(format!("restore-{}.lock", self.id))
    }
}
