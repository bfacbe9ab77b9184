//! The reports of rewinds and forks (serialisable, snake_case).

use crate::ids::{CheckpointId, EntryId, MemoryId, RewindId, RunId, ThreadId};
use crate::model::CheckpointRef;
use cairn_store::SnapshotId;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a rewind did (or, with `dry_run`, would do).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub struct RewindReport {
    /// The rewind record (`None` for a dry run).
    pub rewind_id: Option<RewindId>,
    /// The thread.
    pub thread_id: ThreadId,
    /// The entry the thread was rewound to; `None` for the start of the thread (a restore
    /// before its first message).
    pub to_entry_id: Option<EntryId>,
    /// Nothing was changed.
    pub dry_run: bool,
    /// The conversation part.
    pub conversation: ConversationReport,
    /// The files part, when files were restored.
    pub files: Option<FilesReport>,
    /// The memory part.
    pub memory: MemoryReport,
    /// The runs part.
    pub runs: RunsReport,
    /// The rewind was finished when the database was opened after a crash.
    pub recovered: bool,
    /// The data of the rewind's [`crate::Continuation`] (what the agent needs to continue its
    /// conversation from the point), also when recovery finished it or its key was repeated;
    /// for a dry run, what would be recorded.
    #[serde(default)]
    pub continuation: Option<serde_json::Value>,
}

/// The conversation part of a rewind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConversationReport {
    /// The active leaf moved.
    pub rewound: bool,
    /// The entries taken off the active branch (they stay on a branch of their own), in order.
    pub cut: Vec<EntryId>,
    /// The entries put back on the active branch, in order: a rewind to a point past the
    /// active leaf (a "Before rewind" checkpoint, an entry of a branch a rewind cut) brings
    /// them back.
    #[serde(default)]
    pub restored: Vec<EntryId>,
    /// The active leaf before the rewind.
    pub previous_leaf_id: Option<EntryId>,
}

/// The label of the checkpoint a rewind or restore with files records of the state it left
/// (kind `manual`): the safety snapshot of the files and the active leaf before it.
pub const BEFORE_REWIND: &str = "Before rewind";

/// The files part of a rewind or fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FilesReport {
    /// The entry whose checkpoint was restored.
    pub entry_id: Option<EntryId>,
    /// The checkpoint restored.
    pub checkpoint_id: CheckpointId,
    /// Its snapshot.
    pub snapshot_id: SnapshotId,
    /// The files are exactly those at the point (the next user message's checkpoint); `false`:
    /// those before the turn that holds the point.
    pub exact: bool,
    /// The workspace restored.
    pub workspace_id: String,
    /// Its root.
    #[serde(with = "crate::model::path_text")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub root: PathBuf,
    /// The snapshot of the files before they changed: restoring it undoes the files part.
    pub safety_snapshot_id: Option<SnapshotId>,
    /// A rewind's "Before rewind" checkpoint: the safety snapshot and the active leaf before
    /// the rewind, listed with the thread's checkpoints (label [`BEFORE_REWIND`]);
    /// [`crate::Threads::rewind_to_checkpoint`] of it brings the files and the conversation
    /// back. `None` when the restore changed nothing (and for forks).
    #[serde(default)]
    pub before_rewind_checkpoint_id: Option<CheckpointId>,
    /// The workspace's restore report (its plan, for a dry run).
    pub restore: serde_json::Value,
}

/// The memory part of a rewind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryReport {
    /// Items that stood only on cut entries, now stale (reason `rewound`).
    pub staled: Vec<MemoryId>,
}

/// The runs part of a rewind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunsReport {
    /// Runs that were going when the rewind started.
    pub going: Vec<RunId>,
    /// Runs a forced rewind stopped (`RUN_INTERRUPTED`).
    pub interrupted: Vec<RunId>,
    /// Paused runs dropped.
    pub paused: Vec<RunId>,
    /// Durable runs dropped.
    pub durable: Vec<RunId>,
}

/// What a fork did (or, with `dry_run`, would do).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub struct ForkReport {
    /// The new thread (the id it would have, for a dry run).
    pub thread_id: ThreadId,
    /// The thread forked.
    pub source_thread_id: ThreadId,
    /// The last entry the fork shares.
    pub at_entry_id: EntryId,
    /// Nothing was made.
    pub dry_run: bool,
    /// The checkpoint of the user message right after the point, which the fork names so a
    /// rewind or fork of it at the point restores the same files.
    pub file_checkpoint_at: Option<CheckpointRef>,
    /// Snapshots copied into the fork's workspace's store (would be, for a dry run).
    pub snapshots_copied: Vec<SnapshotId>,
    /// The files part, with files.
    pub files: Option<FilesReport>,
    /// Runs going in the thread or workspace, and those a forced fork stopped.
    pub runs: RunsReport,
}

/// What opening the database (or [`crate::Threads::recover`]) finished after a crash.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recovery {
    /// Rewinds whose files were done, now completed.
    pub completed: Vec<RewindReport>,
    /// Rewinds stopped before their files were restored, marked failed (the conversation is as
    /// it was; the same key retries).
    pub failed: Vec<RewindId>,
    /// Rewinds whose workspace was not given, left for later.
    pub pending: Vec<RewindId>,
    /// Rewinds whose files are part restored, waiting for the workspace's restore recovery
    /// (paths in its way): left unfinished, their records saying so.
    pub blocked: Vec<BlockedRewind>,
    /// Forks a crash interrupted, taken back.
    pub forks_taken_back: Vec<ThreadId>,
}

/// A rewind whose files are part restored and wait for the restore's recovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedRewind {
    /// The rewind.
    pub rewind_id: RewindId,
    /// The restore journal that holds its files.
    pub journal: String,
    /// Where the files stand and what to do (also the record's message).
    pub message: String,
}
