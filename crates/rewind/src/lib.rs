//! `cairn-rewind`: threads whose messages carry checkpoints of the workspace, and the rewind
//! and fork that move the files and the conversation back together.
//!
//! A [`Threads`] handle opens an SQLite database (WAL mode; by default `<store>/threads.db`)
//! that several processes may share, or a PostgreSQL database (a `postgres://` URL) that
//! several machines may share, with the same schema and guarantees. It holds threads and their entries (a tree of branches
//! with one active leaf; nothing is ever deleted), the checkpoints this layer took (snapshots
//! bound to entries), memory items and the entries they stand on, runs with leases and their
//! tool calls, rewind and fork records with idempotency keys, an inbox of prompts queued for
//! each thread's next safe boundary ([`Threads::enqueue`], [`Threads::deliver`]; cancelled by
//! a rewind), and an append-only event log.
//!
//! Files are reached only through the [`Files`] seam, which `cairn-restore`'s
//! [`cairn_restore::Workspace`] implements (see [`workspace`]): a checkpoint is a workspace
//! snapshot labelled with the entry's id, and a rewind's files are restored by a planned,
//! journalled apply after a safety snapshot. Tests may use fakes.
//!
//! ```
//! use cairn_rewind::{NewEntry, RewindOptions, Threads, ThreadsOptions, AppendOptions};
//! # fn main() -> Result<(), cairn_rewind::Error> {
//! let dir = tempfile::tempdir().expect("a temporary directory");
//! let threads = Threads::open(dir.path().join("threads.db"), ThreadsOptions::default())?;
//! let chat = threads.create_thread(Some("chat".into()), serde_json::json!({}))?;
//! let first = threads.append(&chat.id, NewEntry::user("hello"), &AppendOptions::default())?;
//! threads.append(&chat.id, NewEntry::assistant("hi"), &AppendOptions::default())?;
//! threads.append(&chat.id, NewEntry::user("do something"), &AppendOptions::default())?;
//! let report = threads.rewind(&chat.id, &first.entry.id, &RewindOptions::default())?;
//! assert_eq!(report.conversation.cut.len(), 2);
//! assert_eq!(threads.active_branch(&chat.id)?.len(), 1);
//! assert_eq!(threads.entries(&chat.id, true)?.len(), 3); // nothing is deleted
//! # Ok(()) }
//! ```
//!
//! # Feature flags
//!
//! - `schema`: derives `schemars::JsonSchema` for the reports the C ABI sends out (off by
//!   default; `cairn-ffi`'s tests turn it on to make `include/cairn.schema.json`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod attribution;
mod check;
mod db;
pub mod error;
mod events;
pub mod files;
mod fork;
mod guard;
pub mod ids;
mod lineage;
mod memory;
pub mod model;
mod names;
pub mod policy;
pub mod report;
mod rewind;
mod rows;
mod runs;
mod sql;
mod threads;
pub mod workspace;

pub use attribution::{attribute, attribute_changes, Attribution};
pub use check::DbCheck;
pub use db::SCHEMA_VERSION;
pub use db::{is_pg_url, redact_url};
pub use error::{DbError, Error, FilesError, FilesFailure, Result};
pub use files::{CheckpointRequest, FileOutcome, FilePlan, Files, Interrupted};
pub use fork::ForkOptions;
pub use ids::{CheckpointId, EntryId, ForkId, MemoryId, RewindId, RunId, ThreadId, ToolCallId};
pub use model::{
    roots_overlap, Branch, Checkpoint, CheckpointKind, CheckpointRef, Entry, EntryKind, Event,
    EventKind, MemoryItem, MemoryKind, MemoryStatus, NewEntry, NewMemory, RunInfo, RunStatus,
    Thread, ThreadRuns, FILE_CHECKPOINT_KEY,
};
pub use names::Continuation;
pub use policy::{Checkpoints, EffectivePolicy};
pub use report::{
    BlockedRewind, ConversationReport, FilesReport, ForkReport, MemoryReport, Recovery,
    RewindReport, RunsReport, BEFORE_REWIND,
};
pub use rewind::{RewindOptions, RewindRecord};
pub use runs::{Run, RunOptions};
pub use threads::{
    Admission, AppendOptions, Appended, CheckpointFailure, CheckpointOptions, DeliverOptions,
    Delivery, PromptState, Threads, ThreadsOptions, DB_FILE,
};
