//! `cairn-restore`: the [`Workspace`] (a root, its store, its capture settings and holds) and
//! restores that never lose data.
//!
//! A restore is two calls: [`Workspace::plan`] walks the current files with the snapshot's own
//! capture settings and the stat cache and lists every change (`restored`, `deleted`,
//! `unchanged`, `kept` with reasons, `busy`, `drifted`); it *is* the dry run.
//! [`Workspace::apply`] then checks holds, takes a safety snapshot, re-checks the plan against
//! it, syncs a journal, stages and verifies every new content, and changes files through
//! directory descriptors that never follow a symlink. Files already right are not touched.
//! [`Workspace::restore`] does both with one walk.
//!
//! What each call does is its options ([`PlanOptions`], kept in the plan; [`ApplyOptions`];
//! `cairn_snapshot::Options`, whose [`cairn_snapshot::CaptureSettings`] the
//! [`WorkspaceOptions`] embed too); what watches and steers it (cancel, progress, threads) is
//! its [`Context`], apart.
//!
//! ```
//! use cairn_restore::{ApplyOptions, Context, PlanOptions, Workspace, WorkspaceOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let root = dir.path().join("project");
//! std::fs::create_dir(&root)?;
//! std::fs::write(root.join("a.txt"), "one")?;
//! // With `store: None` the store is the workspace's in the user's data directory
//! // (`home::default_store`); this example keeps it beside the project.
//! let options = WorkspaceOptions {
//!     store: Some(dir.path().join("store")),
//!     ..WorkspaceOptions::default()
//! };
//! let ws = Workspace::open(&root, options)?;
//! let snap = ws.snapshot(&ws.snapshot_options(), Context::default())?.snapshot;
//! std::fs::write(root.join("a.txt"), "two")?;
//! let report = ws.restore(
//!     &snap.id,
//!     &PlanOptions::default(),
//!     &ApplyOptions::default(),
//!     Context::default(),
//! )?;
//! assert_eq!(std::fs::read_to_string(root.join("a.txt"))?, "one");
//! assert!(report.safety_snapshot_id.is_some());
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// Reading order, each module using only those before it: error, safe, home, site (what every
// step works on), hold, plan, report, exec (the executor), journal (records and recovers a
// restore), apply (runs one), workspace (the façade whose methods call them all).
pub mod apply;
pub mod error;
mod exec;
pub mod hold;
pub mod home;
pub mod journal;
pub mod plan;
pub mod report;
mod safe;
mod site;
pub mod watch;
mod watch_socket;
mod watched;
pub mod workspace;

pub use apply::{files_after, ApplyOptions};
pub use cairn_snapshot::Context;
pub use error::{Error, Result};
pub use hold::{Hold, HoldInfo};
pub use home::default_workspace_id;
pub use journal::{Journal, Recovery, State as JournalState, StrayStaged};
pub use plan::{
    normalize_paths, Action, DriftPolicy, KeptPath, KeptReason, Plan, PlanOptions, Summary,
};
pub use report::Report;
pub use workspace::{SnapshotOutcome, Workspace, WorkspaceOptions};
