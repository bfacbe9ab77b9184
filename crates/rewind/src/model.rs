//! The values the thread database holds and returns.

use crate::ids::{CheckpointId, EntryId, MemoryId, RunId, ThreadId};
use cairn_store::SnapshotId;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The metadata key under which an entry names the checkpoint taken before it.
pub const FILE_CHECKPOINT_KEY: &str = "file_checkpoint";

/// The kind of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A user message: a checkpoint is taken before it when the policy is on.
    User,
    /// A model's message.
    Assistant,
    /// A tool call or its result: a checkpoint is taken before it with `before_tools`.
    Tool,
    /// A note (does not end a turn).
    Note,
    /// A session event (does not end a turn).
    Event,
    /// A compaction: with `before_compaction` it names the checkpoint taken before it.
    Compaction,
}

impl EntryKind {
    /// The name stored in the database and used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::User => "user",
            EntryKind::Assistant => "assistant",
            EntryKind::Tool => "tool",
            EntryKind::Note => "note",
            EntryKind::Event => "event",
            EntryKind::Compaction => "compaction",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<EntryKind> {
        Some(match s {
            "user" => EntryKind::User,
            "assistant" => EntryKind::Assistant,
            "tool" => EntryKind::Tool,
            "note" => EntryKind::Note,
            "event" => EntryKind::Event,
            "compaction" => EntryKind::Compaction,
            _ => return None,
        })
    }

    /// Whether entries of this kind may stand between the end of a turn and the next user
    /// message without ending the turn (notes and session events).
    pub fn is_between_turns(self) -> bool {
        matches!(self, EntryKind::Note | EntryKind::Event)
    }
}

/// A new entry to append.
#[derive(Debug, Clone)]
pub struct NewEntry {
    /// Its kind.
    pub kind: EntryKind,
    /// Opaque bytes (the message, as the runtime encodes it).
    pub payload: Vec<u8>,
    /// A JSON object of the caller's; the checkpoint reference is added under
    /// [`FILE_CHECKPOINT_KEY`].
    pub metadata: serde_json::Value,
}

impl NewEntry {
    /// An entry of `kind` with `payload` and empty metadata.
    pub fn new(kind: EntryKind, payload: impl Into<Vec<u8>>) -> Self {
        NewEntry {
            kind,
            payload: payload.into(),
            metadata: serde_json::Value::Object(Default::default()),
        }
    }

    /// A user message.
    pub fn user(payload: impl Into<Vec<u8>>) -> Self {
        NewEntry::new(EntryKind::User, payload)
    }

    /// An assistant message.
    pub fn assistant(payload: impl Into<Vec<u8>>) -> Self {
        NewEntry::new(EntryKind::Assistant, payload)
    }

    /// The same entry with `metadata`.
    pub fn with_metadata(mut self, metadata: serde_json::Value) -> Self {
        self.metadata = metadata;
        self
    }
}

/// A checkpoint reference: which snapshot of which workspace holds the files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CheckpointRef {
    /// The checkpoint (this crate's record of it).
    pub checkpoint_id: CheckpointId,
    /// The snapshot.
    pub snapshot_id: SnapshotId,
    /// The workspace it was taken of.
    pub workspace_id: String,
    /// That workspace's root.
    #[serde(with = "crate::model::path_text")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub root: PathBuf,
}

/// An entry of a thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Entry {
    /// Its id.
    pub id: EntryId,
    /// The thread that wrote it (a fork shares the entries of its prefix with its source).
    pub thread_id: ThreadId,
    /// The entry before it, `None` for the first.
    pub parent_id: Option<EntryId>,
    /// Its kind.
    pub kind: EntryKind,
    /// Its opaque payload.
    #[serde(skip)]
    pub payload: Vec<u8>,
    /// Its metadata (a JSON object).
    pub metadata: serde_json::Value,
    /// The checkpoint taken before it, as this crate recorded it.
    pub checkpoint: Option<CheckpointRef>,
    /// The run that appended it.
    pub run_id: Option<RunId>,
    /// The admission key it was appended with.
    pub key: Option<String>,
    /// When it was appended (ms since the Unix epoch).
    pub created_ms: i64,
    /// Its place in the order of all writes (increasing).
    pub seq: i64,
    /// Whether it is on the thread's active branch (as [`crate::Threads::entries`],
    /// [`crate::Threads::entry`] and [`crate::Threads::append`] return it).
    pub on_active_branch: bool,
}

/// Why a checkpoint was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    /// Before a user message.
    User,
    /// Before a tool entry.
    Tool,
    /// Before a compaction.
    Compaction,
    /// By hand ([`crate::Threads::checkpoint`]).
    Manual,
}

impl CheckpointKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            CheckpointKind::User => "user",
            CheckpointKind::Tool => "tool",
            CheckpointKind::Compaction => "compaction",
            CheckpointKind::Manual => "manual",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "user" => CheckpointKind::User,
            "tool" => CheckpointKind::Tool,
            "compaction" => CheckpointKind::Compaction,
            "manual" => CheckpointKind::Manual,
            _ => return None,
        })
    }

    pub(crate) fn of_entry(kind: EntryKind) -> Self {
        match kind {
            EntryKind::Tool => CheckpointKind::Tool,
            EntryKind::Compaction => CheckpointKind::Compaction,
            _ => CheckpointKind::User,
        }
    }
}

/// A checkpoint: a snapshot this crate took, bound to a thread and an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Checkpoint {
    /// Its id.
    pub id: CheckpointId,
    /// The thread it was taken in.
    pub thread_id: ThreadId,
    /// The entry it was taken for (user, tool, compaction) or at (manual; `None` on an empty
    /// thread).
    pub entry_id: Option<EntryId>,
    /// Why it was taken.
    pub kind: CheckpointKind,
    /// The manual label.
    pub label: Option<String>,
    /// The snapshot.
    pub snapshot_id: SnapshotId,
    /// The workspace.
    pub workspace_id: String,
    /// The workspace's root.
    #[serde(with = "crate::model::path_text")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub root: PathBuf,
    /// The run that took it.
    pub run_id: Option<RunId>,
    /// When (ms since the Unix epoch).
    pub created_ms: i64,
}

impl Checkpoint {
    /// The reference an entry keeps.
    pub fn reference(&self) -> CheckpointRef {
        CheckpointRef {
            checkpoint_id: self.id.clone(),
            snapshot_id: self.snapshot_id,
            workspace_id: self.workspace_id.clone(),
            root: self.root.clone(),
        }
    }
}

/// A thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Thread {
    /// Its id.
    pub id: ThreadId,
    /// The end of its active branch; `None` while it is empty.
    pub active_leaf: Option<EntryId>,
    /// The thread it was forked from.
    pub parent_thread: Option<ThreadId>,
    /// The entry it was forked at (the last entry it shares).
    pub fork_entry: Option<EntryId>,
    /// When the files at the fork point come from the user message right after it (which the
    /// fork does not share), that message's checkpoint: rewinding or forking the fork at its
    /// point restores the same files.
    pub file_checkpoint_at: Option<CheckpointRef>,
    /// The caller's metadata.
    pub metadata: serde_json::Value,
    /// When it was made (ms since the Unix epoch).
    pub created_ms: i64,
}

/// One branch of a thread: a leaf and how many entries lead to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Branch {
    /// The last entry of the branch.
    pub leaf: EntryId,
    /// Entries from the start of the thread to the leaf.
    pub length: usize,
    /// Whether it is the active branch.
    pub active: bool,
}

/// What a memory item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// A fact or note remembered from entries.
    Item,
    /// A summary of entries: seen only from a branch holding all of them.
    Summary,
}

/// Whether a memory item still holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum MemoryStatus {
    /// It holds.
    Active,
    /// It stood only on entries a rewind cut.
    Stale {
        /// Why (`rewound`).
        reason: String,
        /// The rewind that made it stale.
        rewind_id: Option<String>,
    },
}

/// A new memory item.
#[derive(Debug, Clone)]
pub struct NewMemory {
    /// Item or summary.
    pub kind: MemoryKind,
    /// Its text.
    pub text: String,
    /// Opaque bytes.
    pub payload: Vec<u8>,
    /// The entries it stands on (of the thread's lineage).
    pub stands_on: Vec<EntryId>,
}

/// A memory item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryItem {
    /// Its id.
    pub id: MemoryId,
    /// The thread it belongs to.
    pub thread_id: ThreadId,
    /// Item or summary.
    pub kind: MemoryKind,
    /// Its text.
    pub text: String,
    /// Opaque bytes.
    #[serde(skip)]
    pub payload: Vec<u8>,
    /// The entries it stands on.
    pub stands_on: Vec<EntryId>,
    /// Whether it still holds.
    #[serde(flatten)]
    pub status: MemoryStatus,
    /// When it was added (ms since the Unix epoch).
    pub created_ms: i64,
}

/// The state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Running (going while its lease holds).
    Running,
    /// Paused (waiting for an approval, say): not going, dropped by a rewind.
    Paused,
    /// Ended by its owner.
    Ended,
    /// Stopped by a forced rewind (`RUN_INTERRUPTED`).
    Interrupted,
    /// Dropped by a rewind (a paused or durable run whose checkpoint holds a cut conversation).
    Dropped,
}

impl RunStatus {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Ended => "ended",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Dropped => "dropped",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "paused" => RunStatus::Paused,
            "ended" => RunStatus::Ended,
            "interrupted" => RunStatus::Interrupted,
            "dropped" => RunStatus::Dropped,
            _ => return None,
        })
    }
}

/// A run as the database knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunInfo {
    /// Its id.
    pub id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Its workspace, if it has one.
    pub workspace_id: Option<String>,
    /// The workspace's root.
    #[serde(serialize_with = "crate::model::opt_path_text::serialize")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub root: Option<PathBuf>,
    /// Whether it survives its process (another process may resume it).
    pub durable: bool,
    /// The run whose tool call started it (a subagent).
    pub parent_run: Option<RunId>,
    /// Its state.
    pub status: RunStatus,
    /// Running with a lease that has not run out: it goes on.
    pub going: bool,
    /// Held by this handle (this process).
    pub here: bool,
    /// When its lease runs out (ms since the Unix epoch).
    pub lease_expires_ms: i64,
    /// Tool calls started and not finished (they may outlive the run).
    pub open_tool_calls: u64,
    /// When it started (ms since the Unix epoch).
    pub started_ms: i64,
}

/// The runs of a thread that matter to a rewind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadRuns {
    /// Runs going on (running, lease not run out).
    pub going: Vec<RunInfo>,
    /// Paused runs.
    pub paused: Vec<RunInfo>,
    /// Durable runs not ended (going or not).
    pub durable: Vec<RunInfo>,
}

/// What an event says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A thread was created.
    ThreadCreated,
    /// A checkpoint was taken.
    CheckpointCreated,
    /// An entry was appended.
    EntryAppended,
    /// A rewind took the thread and started.
    RewindStarted,
    /// A rewind failed; the conversation is as it was.
    RewindFailed,
    /// A rewind completed.
    RewindCompleted,
    /// A fork was made.
    ForkCreated,
    /// Files were restored: by a rewind with files (its `rewind_id`), or by a restore of the
    /// workspace recorded with [`crate::Threads::record_restore`] (no thread). Since schema
    /// version 2.
    RestoreApplied,
    /// A prompt was queued in the thread's inbox (`key`). Since schema version 4.
    PromptQueued,
    /// A queued prompt was delivered at a safe boundary: its `key`, the `entry_id` it became
    /// and its `checkpoint_id`. Since schema version 4.
    PromptDelivered,
    /// A queued prompt was cancelled by a rewind (`key`, `rewind_id`). Since schema version 4.
    PromptCancelled,
}

impl EventKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            EventKind::ThreadCreated => "thread_created",
            EventKind::CheckpointCreated => "checkpoint_created",
            EventKind::EntryAppended => "entry_appended",
            EventKind::RewindStarted => "rewind_started",
            EventKind::RewindFailed => "rewind_failed",
            EventKind::RewindCompleted => "rewind_completed",
            EventKind::ForkCreated => "fork_created",
            EventKind::RestoreApplied => "restore_applied",
            EventKind::PromptQueued => "prompt_queued",
            EventKind::PromptDelivered => "prompt_delivered",
            EventKind::PromptCancelled => "prompt_cancelled",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "thread_created" => EventKind::ThreadCreated,
            "checkpoint_created" => EventKind::CheckpointCreated,
            "entry_appended" => EventKind::EntryAppended,
            "rewind_started" => EventKind::RewindStarted,
            "rewind_failed" => EventKind::RewindFailed,
            "rewind_completed" => EventKind::RewindCompleted,
            "fork_created" => EventKind::ForkCreated,
            "restore_applied" => EventKind::RestoreApplied,
            "prompt_queued" => EventKind::PromptQueued,
            "prompt_delivered" => EventKind::PromptDelivered,
            "prompt_cancelled" => EventKind::PromptCancelled,
            _ => return None,
        })
    }
}

/// An event of the append-only log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Event {
    /// Its cursor: pass it to [`crate::Threads::events_since`] to read what follows.
    pub cursor: i64,
    /// The thread concerned.
    pub thread_id: Option<ThreadId>,
    /// What happened.
    pub kind: EventKind,
    /// The details (ids), a JSON object.
    pub data: serde_json::Value,
    /// When (ms since the Unix epoch).
    pub created_ms: i64,
}

/// Serialises a path as text (lossy for names that are not UTF-8).
pub(crate) mod path_text {
    use std::path::{Path, PathBuf};

    pub fn serialize<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&p.to_string_lossy())
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        <String as serde::Deserialize>::deserialize(d).map(PathBuf::from)
    }
}

/// Serialises an optional path as text.
pub(crate) mod opt_path_text {
    use std::path::PathBuf;

    pub fn serialize<S: serde::Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(&p.to_string_lossy()),
            None => s.serialize_none(),
        }
    }
}

/// A root path as the bytes stored in the database.
pub(crate) fn root_bytes(p: &std::path::Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes().to_vec()
}

/// A root path from the bytes stored in the database.
pub(crate) fn root_path(b: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(b))
}

/// Whether two workspace roots overlap: the same, or one holds the other.
pub fn roots_overlap(a: &std::path::Path, b: &std::path::Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}
