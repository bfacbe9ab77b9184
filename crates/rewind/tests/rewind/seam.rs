//! The restore → rewind seam is typed (issue 61): the plan a rewind's dry run lists is the plan
//! its restore applies, with its chosen paths and drift rule, even when the plan travels (as
//! JSON, between processes) before it is applied.

use crate::real::{real, write_in};
use cairn_restore::{DriftPolicy, Workspace};
use cairn_rewind::{FileOutcome, FilePlan, Files, FilesError, NewEntry, RewindOptions, ThreadId};
use cairn_store::{RelPath, SnapshotId};
use std::path::Path;
use std::sync::Arc;

/// A workspace whose plans cross a process boundary before they are applied: `apply` gets the
/// plan back from its JSON, as a daemon or another process would.
struct Relay(Arc<Workspace>);

impl Files for Relay {
    fn id(&self) -> &str {
        self.0.id()
    }
    fn root(&self) -> &Path {
        Workspace::root(&self.0)
    }
    fn store(&self) -> Option<&cairn_store::Store> {
        Some(self.0.store())
    }
    fn checkpoint(&self, r: &cairn_rewind::CheckpointRequest) -> Result<SnapshotId, FilesError> {
        Files::checkpoint(&*self.0, r)
    }
    fn keeps(&self, s: &SnapshotId) -> Result<bool, FilesError> {
        Files::keeps(&*self.0, s)
    }
    fn plan(&self, s: &SnapshotId) -> Result<FilePlan, FilesError> {
        Files::plan(&*self.0, s)
    }
    fn plan_scoped(
        &self,
        s: &SnapshotId,
        scope: &cairn_restore::PlanOptions,
    ) -> Result<FilePlan, FilesError> {
        Files::plan_scoped(&*self.0, s, scope)
    }
    fn apply(&self, plan: &FilePlan, key: &str) -> Result<FileOutcome, FilesError> {
        let sent = serde_json::to_string(&plan.plan).expect("a plan encodes");
        let received = FilePlan::new(serde_json::from_str(&sent).expect("a plan decodes"));
        assert_eq!(received, *plan, "a plan is the same after its journey");
        Files::apply(&*self.0, &received, key)
    }
    fn finished(&self, key: &str, t: &SnapshotId) -> Result<Option<FileOutcome>, FilesError> {
        Files::finished(&*self.0, key, t)
    }
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a path").to_string())
        .collect()
}

// Issue 61: a plan that lost its type restored the whole workspace, dropping the chosen paths
// and the drift rule its dry run had listed.
#[test]
fn a_rewind_with_chosen_paths_and_a_drift_rule_restores_exactly_what_its_dry_run_listed() {
    let real = real();
    let thread: ThreadId = real
        .threads
        .create_thread(Some("chat".into()), serde_json::json!({}))
        .expect("thread")
        .id;
    for f in ["a.txt", "b.txt", "c.txt"] {
        real.write(f, "v1");
    }
    let run = real.run(&thread);
    let u1 = real.say(&thread, &run, NewEntry::user("make them v2"));
    for f in ["a.txt", "b.txt", "c.txt"] {
        let call = real.threads.tool_start(&run, "write_file").expect("tool");
        real.write(f, "v2");
        real.threads.tool_finish(&call).expect("finish");
    }
    real.say(&thread, &run, NewEntry::assistant("done"));
    real.say(&thread, &run, NewEntry::user("thanks"));
    real.threads.end_run(&run).expect("end");
    // Someone else edits b.txt after the newest checkpoint: it drifted.
    write_in(real.root(), "b.txt", "theirs");

    let relay: Arc<dyn Files> = Arc::new(Relay(real.ws.clone()));
    let options = RewindOptions {
        files: Some(true),
        workspace: Some(relay),
        paths: vec![RelPath::from("a.txt"), RelPath::from("b.txt")],
        on_drift: Some(DriftPolicy::Skip),
        ..Default::default()
    };
    let dry = real
        .threads
        .rewind(
            &thread,
            &u1.entry.id,
            &RewindOptions {
                dry_run: true,
                ..options.clone()
            },
        )
        .expect("dry run")
        .files
        .expect("files")
        .restore;
    assert_eq!(strings(&dry["restored"]), ["a.txt"], "{dry}");
    assert_eq!(strings(&dry["drifted"]), ["b.txt"], "{dry}");
    assert_eq!(strings(&dry["paths"]), ["a.txt", "b.txt"], "{dry}");

    let done = real
        .threads
        .rewind(&thread, &u1.entry.id, &options)
        .expect("rewind")
        .files
        .expect("files")
        .restore;
    for key in ["restored", "deleted", "drifted", "paths", "kept"] {
        assert_eq!(
            done[key], dry[key],
            "{key}: the dry run listed {dry}, the restore did {done}"
        );
    }
    assert_eq!(
        real.read("a.txt").as_deref(),
        Some("v1"),
        "chosen, restored"
    );
    assert_eq!(
        real.read("b.txt").as_deref(),
        Some("theirs"),
        "drifted, skipped"
    );
    assert_eq!(
        real.read("c.txt").as_deref(),
        Some("v2"),
        "not chosen, untouched"
    );
}
