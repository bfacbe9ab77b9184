//! What a restore did: the plan's [`Summary`] and what carrying it out added.

use crate::plan::{Plan, Summary};
use cairn_store::{RelPath, SnapshotId};
use serde::{Deserialize, Serialize};

/// What a restore did (or, for a dry run, would do).
///
/// In JSON its summary's fields sit among its own, as they always have: `snapshot_id`,
/// `dry_run`, then [`Summary`]'s, then `paths`, `safety_snapshot_id`, `operations`,
/// `as_planned`, `journal`, `safety_walk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "RestoreReport"))]
pub struct Report {
    /// The snapshot restored.
    pub snapshot_id: SnapshotId,
    /// Whether this is a dry run (nothing changed).
    pub dry_run: bool,
    /// What the plan changes and leaves alone.
    #[serde(flatten)]
    pub summary: Summary,
    /// The paths the restore was restricted to (empty: the whole workspace).
    #[serde(default)]
    pub paths: Vec<RelPath>,
    /// The snapshot of the files before the restore changed them (the whole workspace);
    /// restoring it (with the same `paths`, when the restore had some) undoes this.
    pub safety_snapshot_id: Option<SnapshotId>,
    /// Operations carried out.
    pub operations: u64,
    /// True when exactly the planned operations were carried out.
    pub as_planned: bool,
    /// The journal that recorded it.
    pub journal: Option<String>,
    /// How this call's walk for the safety snapshot went: whether a watcher (this process's,
    /// or a `cairn watch` daemon's) spared it the whole tree, and why not. Absent from a dry
    /// run, from a restore that changed nothing and from a report read back from a journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_walk: Option<cairn_snapshot::WalkInfo>,
}

impl Report {
    /// The report of a dry run: what restoring `plan` would do, nothing changed.
    pub fn dry_run(plan: &Plan) -> Report {
        Report::from_plan(plan, true, None, None)
    }

    /// The report of `plan`, carried out under the journal `journal` with the safety snapshot
    /// `safety`, taking its lists.
    pub(crate) fn of_plan(mut plan: Plan, safety: Option<SnapshotId>, journal: String) -> Report {
        let summary = std::mem::take(&mut plan.summary);
        let paths = std::mem::take(&mut plan.paths);
        Report {
            summary,
            paths,
            ..Report::from_plan(&plan, false, safety, Some(journal))
        }
    }

    pub(crate) fn from_plan(
        plan: &Plan,
        dry_run: bool,
        safety: Option<SnapshotId>,
        journal: Option<String>,
    ) -> Report {
        Report {
            snapshot_id: plan.snapshot_id,
            dry_run,
            summary: plan.summary.clone(),
            paths: plan.paths.clone(),
            safety_snapshot_id: safety,
            operations: if dry_run {
                0
            } else {
                plan.actions.len() as u64
            },
            as_planned: true,
            journal,
            safety_walk: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{DriftPolicy, KeptPath, KeptReason};
    use cairn_store::{CaptureSettings, TreeId};

    /// The keys of a JSON object, in the order they were written (serde_json's map sorts
    /// them: each is placed by where it first appears in the text).
    fn keys(json: &str) -> Vec<String> {
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(json).expect("an object");
        let mut placed: Vec<(usize, String)> = map
            .keys()
            .map(|k| (json.find(&format!("\"{k}\":")).expect("the key"), k.clone()))
            .collect();
        placed.sort();
        placed.into_iter().map(|(_, k)| k).collect()
    }

    fn plan() -> Plan {
        let id = SnapshotId(cairn_store::ObjectId::of(b"target"));
        Plan {
            snapshot_id: id,
            target_root: TreeId(cairn_store::ObjectId::of(b"t")),
            current_root: TreeId(cairn_store::ObjectId::of(b"c")),
            capture: CaptureSettings::default(),
            actions: Vec::new(),
            summary: Summary {
                restored: vec![RelPath::from("a")],
                deleted: vec![RelPath::from("b")],
                unchanged: 3,
                kept: vec![KeptPath {
                    path: RelPath::from("c"),
                    reason: KeptReason::Ignored,
                }],
                busy: false,
                drifted: Vec::new(),
            },
            reference: None,
            paths: vec![RelPath::from("a")],
            on_drift: DriftPolicy::Skip,
        }
    }

    #[test]
    fn a_report_and_a_plan_write_their_summary_fields_in_line_and_in_their_old_order() {
        let plan = plan();
        let report = Report::from_plan(&plan, false, Some(plan.snapshot_id), Some("j".into()));
        let json = serde_json::to_string(&report).expect("json");
        let summary = [
            "restored",
            "deleted",
            "unchanged",
            "kept",
            "busy",
            "drifted",
        ];
        let around = |before: &[&str], after: &[&str]| -> Vec<String> {
            [before, &summary[..], after]
                .concat()
                .into_iter()
                .map(String::from)
                .collect()
        };
        assert_eq!(
            keys(&json),
            around(
                &["snapshot_id", "dry_run"],
                &[
                    "paths",
                    "safety_snapshot_id",
                    "operations",
                    "as_planned",
                    "journal"
                ]
            )
        );
        let back: Report = serde_json::from_str(&json).expect("read back");
        assert_eq!(back, report);
        let json = serde_json::to_string(&plan).expect("json");
        assert_eq!(
            keys(&json),
            around(
                &[
                    "snapshot_id",
                    "target_root",
                    "current_root",
                    "capture",
                    "actions"
                ],
                &["reference", "paths", "on_drift"]
            )
        );
        let back: Plan = serde_json::from_str(&json).expect("read back");
        assert_eq!(back, plan);
    }

    #[test]
    fn a_plan_in_binary_is_its_fields_one_after_another_without_paths_or_on_drift() {
        let plan = plan();
        let bytes = postcard::to_allocvec(&plan).expect("postcard");
        let s = &plan.summary;
        // As journal format 2 wrote a plan before the summary had its own type.
        let fields = (
            (plan.snapshot_id, plan.target_root, plan.current_root),
            (&plan.capture, &plan.actions),
            (
                &s.restored,
                &s.deleted,
                s.unchanged,
                &s.kept,
                s.busy,
                &s.drifted,
            ),
            plan.reference,
        );
        assert_eq!(bytes, postcard::to_allocvec(&fields).expect("postcard"));
        let back: Plan = postcard::from_bytes(&bytes).expect("read back");
        assert_eq!(back.summary, plan.summary);
        assert!(back.paths.is_empty());
    }
}
