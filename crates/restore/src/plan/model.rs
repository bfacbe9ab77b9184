//! A restore plan as a value: its actions, what it keeps and why, its options, its summary,
//! and its two serde forms (tagged JSON for a dry run, compact binary for a journal).

use cairn_store::{CaptureSettings, ObjectId, RelPath, SnapshotId, TreeId};
use serde::{Deserialize, Serialize};

/// Defines [`Action`] and the two serde forms of it from one list of variants.
macro_rules! actions {
    ($(
        $(#[$vdoc:meta])*
        $variant:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }
    )*) => {
        /// One change a restore makes, in the order it is made.
        ///
        /// In JSON (a dry run's plan) an action is an object tagged by `op`; in binary formats
        /// (a journal) it is the variant's index then its fields, which postcard can read back
        /// (it cannot read the tagged form, whose tag must be found among the fields first).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Action {
            $($(#[$vdoc])* $variant { $($(#[$fdoc])* $field: $ty,)* },)*
        }

        /// [`Action`] as JSON: an object tagged by `op`.
        #[derive(Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[cfg_attr(feature = "schema", schemars(rename = "Action"))]
        #[serde(remote = "Action", tag = "op", rename_all = "snake_case")]
        enum TaggedAction {
            $($variant { $($field: $ty,)* },)*
        }

        /// [`Action`] in binary formats: the variant's index, then its fields.
        #[derive(Serialize, Deserialize)]
        #[serde(remote = "Action")]
        enum CompactAction {
            $($variant { $($field: $ty,)* },)*
        }
    };
}

actions! {
    /// Remove a file or a symlink.
    RemoveFile {
        /// The path.
        path: RelPath,
    }
    /// Remove a directory, empty once the removals listed before it are done.
    RemoveDir {
        /// The path.
        path: RelPath,
    }
    /// Create a directory.
    MakeDir {
        /// The path.
        path: RelPath,
        /// Its final mode.
        mode: u32,
    }
    /// Write a file (through a temporary file renamed over the path).
    WriteFile {
        /// The path.
        path: RelPath,
        /// Its content.
        blob: ObjectId,
        /// Its mode.
        mode: u32,
        /// Its size.
        size: u64,
    }
    /// Make a symlink (through a temporary link renamed over the path).
    MakeSymlink {
        /// The path.
        path: RelPath,
        /// The blob of its target bytes.
        target: ObjectId,
    }
    /// Set the mode of a file or directory whose content is right.
    SetMode {
        /// The path.
        path: RelPath,
        /// The mode.
        mode: u32,
        /// Whether it is a directory.
        dir: bool,
    }
}

/// Serialises `$ty` as its `$human` form in human-readable formats (JSON) and as its
/// `$compact` form in binary ones (postcard, for the journal); deserialises likewise.
macro_rules! two_forms {
    ($ty:ident, human $human:ident, compact $compact:ident) => {
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                if s.is_human_readable() {
                    $human::serialize(self, s)
                } else {
                    $compact::serialize(self, s)
                }
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(
                d: D,
            ) -> std::result::Result<$ty, D::Error> {
                if d.is_human_readable() {
                    $human::deserialize(d)
                } else {
                    $compact::deserialize(d)
                }
            }
        }
    };
}

two_forms!(Action, human TaggedAction, compact CompactAction);

impl Action {
    /// The path the action changes.
    pub fn path(&self) -> &RelPath {
        match self {
            Action::RemoveFile { path }
            | Action::RemoveDir { path }
            | Action::MakeDir { path, .. }
            | Action::WriteFile { path, .. }
            | Action::MakeSymlink { path, .. }
            | Action::SetMode { path, .. } => path,
        }
    }
}

/// Why a path is left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum KeptReason {
    /// A default exclude (`.git`, `node_modules`, `.cairn`, the store).
    Excluded,
    /// An exclude glob of the snapshot.
    ExcludedByGlob,
    /// Ignored by `.gitignore` or `.cairnignore`.
    Ignored,
    /// A socket, FIFO or device.
    Special,
    /// The snapshot skipped it (too large, unreadable, changing, a hard link then).
    SkippedBySnapshot,
    /// It cannot be read now.
    Unreadable,
    /// It is larger than the snapshot's `max_file_bytes`.
    TooLarge,
    /// It changes while it is read.
    Changing,
    /// It has several hard links and the snapshot refuses those.
    HardLink,
    /// A directory that holds kept entries.
    HoldsKept,
    /// Edited since the reference snapshot, and the restore was told to skip such paths.
    Drifted,
    /// A file a restore staged (`.cairn-tmp-<journal>-<n>`), left by a crash or copied with the
    /// tree: Cairn's own, never planned as the user's (`cairn recover` removes it).
    Staged,
}

/// A path left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KeptPath {
    /// The path.
    pub path: RelPath,
    /// Why.
    pub reason: KeptReason,
}

/// What to do with paths edited since the reference snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DriftPolicy {
    /// Overwrite them (the safety snapshot keeps them) and list them in `drifted`.
    #[default]
    Overwrite,
    /// Refuse the restore with `CONFLICT`, naming them.
    Refuse,
    /// Leave them as they are (listed in `drifted` and `kept`); `keep` is read as this too.
    #[serde(alias = "keep")]
    Skip,
}

/// How a restore is planned. `Default` is the safest choice. A dry run is a plan:
/// [`crate::Workspace::plan`], and [`crate::Report::dry_run`] for its report.
///
/// It is also the scope a rewind keeps in its stored request (cairn-rewind's `Files` seam), in
/// JSON: `paths`, `reference`, `on_drift`, each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanOptions {
    /// Restore only these paths (each a file, link or directory with everything under it,
    /// relative to the root); empty: the whole workspace. Everything else is left untouched:
    /// the plan, the safety snapshot's undo and the journal cover exactly these paths.
    pub paths: Vec<RelPath>,
    /// A snapshot to compare the current files with (say, the last checkpoint of the thread
    /// being rewound): paths the restore would change that differ from it are `drifted`.
    pub reference: Option<SnapshotId>,
    /// What to do with drifted paths (kept in the plan: applying it checks it again with the
    /// same policy).
    pub on_drift: DriftPolicy,
}

impl PlanOptions {
    /// Whether it plans the whole workspace without a drift check.
    pub fn is_whole(&self) -> bool {
        self.paths.is_empty() && self.reference.is_none()
    }
}

/// What a restore changes and leaves alone: part of its [`Plan`], repeated in its [`crate::Report`].
/// In JSON its fields sit among the plan's (and the report's), not nested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Summary {
    /// Paths written or re-made.
    pub restored: Vec<RelPath>,
    /// Paths removed (a directory with everything in it).
    pub deleted: Vec<RelPath>,
    /// Files already as the snapshot holds them, and with chosen paths the snapshot's files
    /// outside them (left as they are, whatever they hold).
    pub unchanged: u64,
    /// Paths left alone, and why.
    pub kept: Vec<KeptPath>,
    /// Whether a hold stands (a restore would be refused with `BUSY`).
    pub busy: bool,
    /// Paths the restore changes that differ from the reference snapshot.
    pub drifted: Vec<RelPath>,
}

/// A restore plan: every change, before any is made. A plain value; [`crate::apply`] does
/// exactly what it lists.
///
/// In JSON (a dry run) it has every field; in binary formats (a journal, format 2) it has all
/// but `paths` and `on_drift`, which only planning again needs, so journals keep their format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The snapshot restored.
    pub snapshot_id: SnapshotId,
    /// Its root tree.
    pub target_root: TreeId,
    /// The tree the workspace had when planned.
    pub current_root: TreeId,
    /// The capture settings of the snapshot, with which the workspace was walked.
    pub capture: CaptureSettings,
    /// The changes, in order.
    pub actions: Vec<Action>,
    /// What the changes restore, delete and leave alone (what its [`crate::Report`] repeats).
    pub summary: Summary,
    /// The reference snapshot, if one was given.
    pub reference: Option<SnapshotId>,
    /// The paths the restore was restricted to (empty: the whole workspace).
    pub paths: Vec<RelPath>,
    /// What it was told to do with drifted paths.
    pub on_drift: DriftPolicy,
}

/// Defines a serde form of [`Plan`]: its fields, its summary (with `$summary`, if given),
/// then `paths` and `on_drift` with `$attr`.
macro_rules! plan_form {
    ($(#[$doc:meta])* $name:ident, summary $(#[$summary:meta])?, #[$attr:meta]) => {
        $(#[$doc])*
        #[derive(Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[cfg_attr(feature = "schema", schemars(rename = "Plan"))]
        #[serde(remote = "Plan")]
        struct $name {
            snapshot_id: SnapshotId,
            target_root: TreeId,
            current_root: TreeId,
            capture: CaptureSettings,
            actions: Vec<Action>,
            $(#[$summary])?
            summary: Summary,
            reference: Option<SnapshotId>,
            #[$attr]
            paths: Vec<RelPath>,
            #[$attr]
            on_drift: DriftPolicy,
        }
    };
}

plan_form!(
    /// [`Plan`] as JSON: every field (`paths` and `on_drift` may be absent: the whole
    /// workspace, overwrite).
    JsonPlan,
    summary #[serde(flatten)],
    #[serde(default)]
);

plan_form!(
    /// [`Plan`] in binary formats: every field but `paths` and `on_drift` (journal format 2);
    /// the summary a nested struct, which postcard writes as its fields in line.
    CompactPlan,
    summary,
    #[serde(skip)]
);

/// The schema of a plan and of an action is their JSON form's.
#[cfg(feature = "schema")]
mod schema {
    use super::{Action, JsonPlan, Plan, TaggedAction};
    use schemars::{JsonSchema, Schema, SchemaGenerator};
    use std::borrow::Cow;

    impl JsonSchema for Action {
        fn schema_name() -> Cow<'static, str> {
            TaggedAction::schema_name()
        }
        fn json_schema(generator: &mut SchemaGenerator) -> Schema {
            TaggedAction::json_schema(generator)
        }
    }

    impl JsonSchema for Plan {
        fn schema_name() -> Cow<'static, str> {
            JsonPlan::schema_name()
        }
        fn json_schema(generator: &mut SchemaGenerator) -> Schema {
            JsonPlan::json_schema(generator)
        }
    }
}

two_forms!(Plan, human JsonPlan, compact CompactPlan);

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_noop(&self) -> bool {
        self.actions.is_empty()
    }
}
