//! The rewind layer's [`Files`] seam, served by a `cairn-restore` [`Workspace`].

use crate::files::dry_report;
use cairn_restore::journal::State;
use cairn_restore::{Plan, RestoreOptions, Workspace};
use cairn_rewind::{CheckpointRequest, FileOutcome, FilePlan, Files, FilesError};
use cairn_store::{ErrorKind, SnapshotId, Store};
use std::path::Path;

/// A workspace as the rewind layer sees it.
#[derive(Debug)]
pub struct WorkspaceFiles(pub Workspace);

fn json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, FilesError> {
    serde_json::to_value(value)
        .map_err(|e| FilesError::msg(ErrorKind::Panic, format!("cannot encode a report: {e}")))
}

impl Files for WorkspaceFiles {
    fn id(&self) -> &str {
        self.0.id()
    }

    fn root(&self) -> &Path {
        self.0.root()
    }

    fn store(&self) -> Option<&Store> {
        Some(self.0.store())
    }

    fn checkpoint(&self, request: &CheckpointRequest) -> Result<SnapshotId, FilesError> {
        let mut options = self.0.snapshot_options();
        options.label = Some(request.label.clone());
        options.metadata = request.metadata.clone();
        options.excludes.extend(request.exclude.iter().cloned());
        if request.max_file_bytes > 0 {
            options.max_file_bytes = request.max_file_bytes;
        }
        let snap = self.0.snapshot(&options).map_err(FilesError::new)?;
        Ok(snap.id)
    }

    fn keeps(&self, snapshot: &SnapshotId) -> Result<bool, FilesError> {
        Ok(self.0.store().has_snapshot(snapshot))
    }

    fn plan(&self, target: &SnapshotId) -> Result<FilePlan, FilesError> {
        let plan = self
            .0
            .plan(target, &RestoreOptions::default())
            .map_err(FilesError::new)?;
        Ok(FilePlan {
            target: *target,
            report: json(&dry_report(&plan))?,
            changes: plan.actions.len() as u64,
            busy: plan.busy,
            detail: Some(Box::new(plan)),
        })
    }

    fn apply(&self, plan: &FilePlan, key: &str) -> Result<FileOutcome, FilesError> {
        let options = RestoreOptions {
            key: Some(key.to_string()),
            ..RestoreOptions::default()
        };
        let report = match plan.detail.as_ref().and_then(|d| d.downcast_ref::<Plan>()) {
            Some(p) => self.0.apply(p, &options),
            None => self.0.restore(&plan.target, &options),
        }
        .map_err(FilesError::new)?;
        Ok(FileOutcome {
            report: json(&report)?,
            safety_snapshot_id: report.safety_snapshot_id,
        })
    }

    fn finished(&self, key: &str, target: &SnapshotId) -> Result<Option<FileOutcome>, FilesError> {
        let journals = self.0.journals().map_err(FilesError::new)?;
        for j in journals {
            if j.key.as_deref() == Some(key) && j.target == *target && j.state == State::Done {
                let report = match &j.report {
                    Some(r) => json(r)?,
                    None => serde_json::Value::Null,
                };
                return Ok(Some(FileOutcome {
                    report,
                    safety_snapshot_id: j.safety,
                }));
            }
        }
        Ok(None)
    }
}
