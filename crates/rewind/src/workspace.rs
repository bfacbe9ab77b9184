//! The [`Files`] seam served by `cairn-restore`'s [`Workspace`]: checkpoints are
//! [`Workspace::snapshot`]s, restores are [`Workspace::plan`] then [`Workspace::apply`]
//! (journalled under the rewind's key, after a safety snapshot), and a restore a crash
//! interrupted is known to have finished by its journal.

use crate::error::FilesError;
use crate::files::{CheckpointRequest, FileOutcome, FilePlan, Files, Interrupted};
use cairn_restore::{ApplyOptions, Context, PlanOptions, Workspace};
use cairn_store::{ErrorKind, SnapshotId, Store};
use std::path::Path;

impl Files for Workspace {
    fn id(&self) -> &str {
        Workspace::id(self)
    }

    fn root(&self) -> &Path {
        Workspace::root(self)
    }

    fn store(&self) -> Option<&Store> {
        Some(Workspace::store(self))
    }

    /// A snapshot with the workspace's capture settings, the policy's excludes added, labelled
    /// and described as the request says.
    fn keep_out(&self, file: &Path) {
        Workspace::keep_out(self, file)
    }

    fn checkpoint(&self, request: &CheckpointRequest) -> Result<SnapshotId, FilesError> {
        let mut options = self.snapshot_options();
        options.label = Some(request.label.clone());
        options.metadata = request.metadata.clone();
        for glob in &request.exclude {
            if !options.capture.excludes.contains(glob) {
                options.capture.excludes.push(glob.clone());
            }
        }
        if request.max_file_bytes > 0 {
            options.capture.max_file_bytes = request.max_file_bytes;
        }
        self.snapshot(&options, cairn_snapshot::Context::default())
            .map(|s| s.snapshot.id)
            .map_err(FilesError::new)
    }

    fn keeps(&self, snapshot: &SnapshotId) -> Result<bool, FilesError> {
        Ok(Workspace::store(self).has_snapshot(snapshot))
    }

    fn plan(&self, target: &SnapshotId) -> Result<FilePlan, FilesError> {
        self.plan_scoped(target, &PlanOptions::default())
    }

    fn plan_scoped(
        &self,
        target: &SnapshotId,
        scope: &PlanOptions,
    ) -> Result<FilePlan, FilesError> {
        Workspace::plan(self, target, scope, Context::default())
            .map(FilePlan::new)
            .map_err(FilesError::new)
    }

    /// Applies the plan as it was planned: its paths, checked again against its reference with
    /// its own drift policy.
    fn apply(&self, plan: &FilePlan, key: &str) -> Result<FileOutcome, FilesError> {
        let options = ApplyOptions::with_key(Some(key.to_string()));
        let report = Workspace::apply(self, &plan.plan, &options, Context::default())
            .map_err(FilesError::new)?;
        Ok(FileOutcome {
            safety_snapshot_id: report.safety_snapshot_id,
            report,
        })
    }

    /// Whether the journal of `key` is done. Opening a workspace completes the journals a crash
    /// left pending, so a restore that a crash cut short is finished by then, or stays pending
    /// when later edits obstruct it (`None` here).
    fn finished(&self, key: &str, target: &SnapshotId) -> Result<Option<FileOutcome>, FilesError> {
        if let Some(j) = self.journal_for_key(key).map_err(FilesError::new)? {
            let given_up = self.journal_given_up(&j.id).map_err(FilesError::new)?;
            if j.target == *target && j.finished() && !given_up {
                let report = j.report.clone().ok_or_else(|| {
                    FilesError::msg(
                        ErrorKind::Corrupt,
                        format!(
                            "restore journal {} of workspace {} is done but holds no report; \
                             run `cairn recover` in {}",
                            j.id,
                            Workspace::id(self),
                            Workspace::root(self).display()
                        ),
                    )
                })?;
                return Ok(Some(FileOutcome {
                    report,
                    safety_snapshot_id: j.safety,
                }));
            }
        }
        Ok(None)
    }

    /// From the journal of `key`: none, or one that died while staging, changed nothing; one
    /// pending or applied (another boot) waits for its recovery; a done one marked given up
    /// was ended part done.
    fn interrupted(&self, key: &str) -> Result<Interrupted, FilesError> {
        let Some(j) = self.journal_for_key(key).map_err(FilesError::new)? else {
            return Ok(Interrupted::NotBegun);
        };
        Ok(match j.state {
            cairn_restore::JournalState::Staging => Interrupted::NotBegun,
            cairn_restore::JournalState::Done => {
                if self.journal_given_up(&j.id).map_err(FilesError::new)? {
                    Interrupted::GivenUp {
                        journal: j.id,
                        safety: j.safety,
                    }
                } else {
                    Interrupted::NotBegun
                }
            }
            _ => Interrupted::Pending {
                journal: j.id,
                safety: j.safety,
            },
        })
    }
}
