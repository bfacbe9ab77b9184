//! The seam between the thread database and a workspace's files.
//!
//! The rewind layer never touches files itself: it takes checkpoints, checks them, plans and
//! applies restores through [`Files`]. `cairn-restore`'s `Workspace` implements it; tests use
//! fakes that record the calls.

use crate::error::FilesError;
use cairn_restore::{Plan, PlanOptions, Report};
use cairn_store::SnapshotId;
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

/// A restore planned by [`Files::plan`]: a dry run, to be handed back to [`Files::apply`],
/// which restores exactly what it lists (its paths, with its drift rule) or nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePlan {
    /// The workspace's plan: every change, with the paths and drift rule it was planned with.
    pub plan: Plan,
}

impl FilePlan {
    /// Wraps a plan. An implementation of [`Files`] other than `cairn-restore`'s `Workspace` (a
    /// test fake) builds its [`Plan`] by its public fields.
    pub fn new(plan: Plan) -> FilePlan {
        FilePlan { plan }
    }

    /// The snapshot to restore.
    pub fn target(&self) -> SnapshotId {
        self.plan.snapshot_id
    }

    /// Something holds the workspace (a command it runs, a hold): the restore would be refused.
    pub fn busy(&self) -> bool {
        self.plan.summary.busy
    }

    /// Its dry-run report.
    pub fn report(&self) -> Report {
        Report::dry_run(&self.plan)
    }
}

/// What a restore did.
///
/// Stored in the thread database while a rewind is under way (`rewinds.files`): in JSON its
/// `report` is written as a JSON value is (keys in alphabetical order), as it always was.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileOutcome {
    /// The workspace's restore report.
    #[serde(serialize_with = "as_json_value")]
    pub report: Report,
    /// The snapshot taken of the files before they changed, if any changed.
    pub safety_snapshot_id: Option<SnapshotId>,
}

/// Writes `value` as its `serde_json::Value` would be written (object keys sorted), so the
/// stored form of a [`FileOutcome`] keeps the bytes it had when its report was a `Value`.
fn as_json_value<T: serde::Serialize, S: serde::Serializer>(
    value: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
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
    fn plan_scoped(
        &self,
        target: &SnapshotId,
        scope: &PlanOptions,
    ) -> Result<FilePlan, FilesError> {
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

    /// Applies a plan as it was planned (its paths, its drift rule: never more), journalled
    /// under `key` (unique to this rewind or fork), after a safety snapshot of what it changes.
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

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_store::{ObjectId, RelPath};

    // Issue 61: the outcome kept in `rewinds.files` reads and writes as it did when its report
    // was a `serde_json::Value`.
    #[test]
    fn a_stored_file_outcome_keeps_the_bytes_it_had_when_its_report_was_a_json_value() {
        let id = SnapshotId(ObjectId::of(b"target"));
        let report = Report {
            snapshot_id: id,
            dry_run: false,
            summary: cairn_restore::Summary {
                restored: vec![RelPath::from("a.txt")],
                unchanged: 2,
                ..Default::default()
            },
            paths: vec![RelPath::from("a.txt")],
            safety_snapshot_id: Some(id),
            operations: 1,
            as_planned: true,
            journal: Some("j1".into()),
            safety_walk: None,
        };
        let outcome = FileOutcome {
            report: report.clone(),
            safety_snapshot_id: Some(id),
        };
        let text = serde_json::to_string(&outcome).expect("encode");
        let old = serde_json::json!({
            "report": serde_json::to_value(&report).expect("a value"),
            "safety_snapshot_id": id,
        });
        assert_eq!(text, serde_json::to_string(&old).expect("encode"));
        let back: FileOutcome = serde_json::from_str(&text).expect("decode");
        assert_eq!(back, outcome);
    }
}
