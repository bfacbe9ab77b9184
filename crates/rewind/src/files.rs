//! The seam between the thread database and a workspace's files.
//!
//! The rewind layer never touches files itself: it takes checkpoints, checks them, plans and
//! applies restores through [`Files`]. `cairn-restore`'s `Workspace` implements it; tests use
//! fakes that record the calls.

use crate::error::FilesError;
use cairn_store::SnapshotId;
use std::any::Any;
use std::path::Path;

/// What a checkpoint is taken with.
#[derive(Debug, Clone, Default)]
pub struct CheckpointRequest {
    /// The snapshot's label: the id of the entry it is taken for, or a manual label.
    pub label: String,
    /// Metadata for the snapshot's manifest (thread, entry, checkpoint and kind).
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Exclude globs on top of the workspace's.
    pub exclude: Vec<String>,
    /// Files larger than this are skipped; 0: the workspace's own limit.
    pub max_file_bytes: u64,
}

/// Which part of the files a restore covers, and what it does with paths edited since the
/// checkpoint being left ([`Files::plan_scoped`]). `Default`: every path, no drift check.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanScope {
    /// Only these paths, relative to the root (a directory with everything under it); empty:
    /// the whole workspace.
    #[serde(default)]
    pub paths: Vec<cairn_store::RelPath>,
    /// The snapshot the files are compared with: a path the restore would change whose
    /// content differs from it was edited by someone else since (it is `drifted`).
    #[serde(default)]
    pub reference: Option<SnapshotId>,
    /// What to do with drifted paths.
    #[serde(default)]
    pub on_drift: cairn_restore::DriftPolicy,
}

impl PlanScope {
    /// Whether it is the whole workspace without a drift check.
    pub fn is_whole(&self) -> bool {
        self.paths.is_empty() && self.reference.is_none()
    }
}

/// A restore planned by [`Files::plan`]: a dry run, to be handed back to [`Files::apply`].
pub struct FilePlan {
    /// The snapshot to restore.
    pub target: SnapshotId,
    /// The plan as the workspace reports it (its dry-run report), serialised.
    pub report: serde_json::Value,
    /// How many paths the restore would change (write, delete, re-mode).
    pub changes: u64,
    /// Something holds the workspace (a command it runs, a hold): the restore would be refused.
    pub busy: bool,
    /// The workspace's own plan value, for [`Files::apply`].
    pub detail: Option<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for FilePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilePlan")
            .field("target", &self.target)
            .field("report", &self.report)
            .field("changes", &self.changes)
            .field("busy", &self.busy)
            .finish_non_exhaustive()
    }
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileOutcome {
    /// The workspace's restore report, serialised.
    pub report: serde_json::Value,
    /// The snapshot taken of the files before they changed, if any changed.
    pub safety_snapshot_id: Option<SnapshotId>,
}

/// A workspace whose files the rewind layer checkpoints and restores.
///
/// Implementations must be safe to call from several threads. Every method but
/// [`Files::apply`] must leave the files as they are.
pub trait Files: Send + Sync {
    /// The workspace id (1 to 64 of `[A-Za-z0-9_.-]`).
    fn id(&self) -> &str;

    /// The workspace root.
    fn root(&self) -> &Path;

    /// The store holding its snapshots, when it has a local one (needed to copy checkpoints
    /// into another workspace's store).
    fn store(&self) -> Option<&cairn_store::Store> {
        None
    }

    /// Names a file Cairn itself keeps that may lie beneath the root (the thread database):
    /// later checkpoints and plans leave it out, as they do the store. The default, for a
    /// workspace whose walks cannot leave a file out, does nothing.
    fn keep_out(&self, _file: &Path) {}

    /// Takes a snapshot of the files.
    fn checkpoint(&self, request: &CheckpointRequest) -> Result<SnapshotId, FilesError>;

    /// Whether the workspace still keeps the snapshot (it may have been pruned).
    fn keeps(&self, snapshot: &SnapshotId) -> Result<bool, FilesError>;

    /// Plans a restore of `target`: a dry run that changes nothing.
    fn plan(&self, target: &SnapshotId) -> Result<FilePlan, FilesError>;

    /// [`Files::plan`] of only some paths, or with a drift check; [`Files::apply`] of the plan
    /// keeps to the same scope. The default plans the whole workspace and refuses any other
    /// scope with `INVALID_ARGUMENT`.
    fn plan_scoped(&self, target: &SnapshotId, scope: &PlanScope) -> Result<FilePlan, FilesError> {
        if scope.is_whole() {
            return self.plan(target);
        }
        Err(FilesError::msg(
            cairn_store::ErrorKind::InvalidArgument,
            format!(
                "workspace {} cannot restore chosen paths or check drift; restore it whole",
                self.id()
            ),
        ))
    }

    /// Applies a plan, journalled under `key` (unique to this rewind or fork), after a safety
    /// snapshot of what it changes.
    fn apply(&self, plan: &FilePlan, key: &str) -> Result<FileOutcome, FilesError>;

    /// After a crash: whether the restore journalled under `key` finished (the files are those
    /// of `target`), and what it did as far as the workspace knows. `Ok(None)` when it did not.
    fn finished(&self, key: &str, target: &SnapshotId) -> Result<Option<FileOutcome>, FilesError>;

    /// After a crash, for a restore [`Files::finished`] says did not finish: whether it changed
    /// nothing, or is part done and waiting for its recovery, or was given up part done. The
    /// default, for a workspace that keeps no journal, is [`Interrupted::NotBegun`].
    fn interrupted(&self, key: &str) -> Result<Interrupted, FilesError> {
        let _ = key;
        Ok(Interrupted::NotBegun)
    }
}

/// Where a restore that did not finish stands (see [`Files::interrupted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interrupted {
    /// It changed nothing: the files are as they were before it.
    NotBegun,
    /// Its changes began, and its journal waits for a recovery that paths in its way stop:
    /// part of the files are the target's, part as they were.
    Pending {
        /// The journal holding it.
        journal: String,
        /// The safety snapshot: the files as they were before it.
        safety: Option<SnapshotId>,
    },
    /// It was given up part done: the files are as it left them.
    GivenUp {
        /// The journal that held it.
        journal: String,
        /// The safety snapshot: the files as they were before it.
        safety: Option<SnapshotId>,
    },
}
