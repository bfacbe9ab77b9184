//! End to end on real files: `cairn-restore` workspaces behind the seam, a conversation whose
//! files change through tool calls and shell commands, rewinds, forks into another workspace,
//! holds, pruned checkpoints, overlapping roots and crashes of whole processes.

use crate::util::{active_ids, eventually, kind};
use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_rewind::{
    AppendOptions, Appended, Checkpoints, EntryId, Files, ForkOptions, NewEntry, RewindOptions,
    Run, RunOptions, ThreadId, Threads, ThreadsOptions, FILE_CHECKPOINT_KEY,
};
use cairn_store::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A real workspace at `<dir>/project` with its store in `<dir>/stores/project`, and the
/// thread database in that store.
pub struct Real {
    pub dir: tempfile::TempDir,
    pub ws: Arc<Workspace>,
    pub threads: Threads,
}

pub fn open_ws(root: &Path, id: &str) -> Workspace {
    std::fs::create_dir_all(root).expect("root");
    Workspace::open(
        root,
        WorkspaceOptions {
            id: Some(id.into()),
            // Beside the roots, in the test's directory (never the data directory of whoever
            // runs the tests).
            store: root
                .parent()
                .zip(root.file_name())
                .map(|(dir, name)| dir.join("stores").join(name)),
            ..Default::default()
        },
    )
    .expect("open the workspace")
}

pub fn real() -> Real {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ws = Arc::new(open_ws(&dir.path().join("project"), "project"));
    let threads =
        crate::util::open_in_store(ws.store().path(), ThreadsOptions::default()).expect("open");
    Real { dir, ws, threads }
}

impl Real {
    pub fn root(&self) -> &Path {
        Workspace::root(&self.ws)
    }

    pub fn write(&self, rel: &str, text: &str) {
        write_in(self.root(), rel, text);
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root().join(rel)).ok()
    }

    pub fn run(&self, thread: &ThreadId) -> Run {
        self.threads
            .begin_run(
                thread,
                RunOptions {
                    workspace: Some(self.ws.clone()),
                    checkpoints: Some(Checkpoints::default()),
                    ..Default::default()
                },
            )
            .expect("begin a run")
    }

    pub fn say(&self, thread: &ThreadId, run: &Run, entry: NewEntry) -> Appended {
        self.threads
            .append(
                thread,
                entry,
                &AppendOptions {
                    run: Some(run.clone()),
                    ..Default::default()
                },
            )
            .expect("append")
    }

    pub fn files(&self) -> RewindOptions {
        RewindOptions {
            files: Some(true),
            workspace: Some(self.ws.clone()),
            ..Default::default()
        }
    }
}

pub fn write_in(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(p, text).expect("write");
}

/// A tool call that writes a file, counted while it runs.
fn write_file(real: &Real, run: &Run, rel: &str, text: &str) {
    let call = real.threads.tool_start(run, "write_file").expect("tool");
    real.write(rel, text);
    real.threads.tool_finish(&call).expect("finish");
}

/// A shell command run in the workspace.
fn shell(real: &Real, run: &Run, script: &str) {
    let call = real.threads.tool_start(run, "shell").expect("tool");
    let status = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(real.root())
        .status()
        .expect("sh");
    assert!(status.success());
    real.threads.tool_finish(&call).expect("finish");
}

/// Two turns: `src/app.txt` is `v1` before the first message, `v2` before the second (and a
/// shell made `built-1.txt` in the first turn), `v3` at the end (the shell made `built-2.txt`).
pub struct RealTurns {
    pub thread: ThreadId,
    pub u1: Appended,
    pub a1: EntryId,
    pub u2: Appended,
    pub a2: EntryId,
}

pub fn real_turns(real: &Real) -> RealTurns {
    let thread = real
        .threads
        .create_thread(Some("chat".into()), serde_json::json!({}))
        .expect("thread")
        .id;
    real.write("src/app.txt", "v1");
    let run = real.run(&thread);
    let u1 = real.say(&thread, &run, NewEntry::user("make it v2"));
    write_file(real, &run, "src/app.txt", "v2");
    shell(real, &run, "echo one > built-1.txt");
    let a1 = real
        .say(&thread, &run, NewEntry::assistant("done"))
        .entry
        .id;
    let u2 = real.say(&thread, &run, NewEntry::user("make it v3"));
    write_file(real, &run, "src/app.txt", "v3");
    shell(real, &run, "echo two > built-2.txt");
    let a2 = real
        .say(&thread, &run, NewEntry::assistant("done"))
        .entry
        .id;
    real.threads.end_run(&run).expect("end");
    RealTurns {
        thread,
        u1,
        a1,
        u2,
        a2,
    }
}

#[test]
fn a_user_message_takes_a_workspace_snapshot_labelled_with_its_entry_id() {
    let real = real();
    let t = real_turns(&real);
    let cp = t.u1.checkpoint.clone().expect("a checkpoint");
    let manifest = real
        .ws
        .store()
        .read_manifest(&cp.snapshot_id)
        .expect("manifest");
    assert_eq!(manifest.label.as_deref(), Some(t.u1.entry.id.as_str()));
    assert_eq!(manifest.workspace_id, "project");
    let meta: serde_json::Value = serde_json::from_str(&manifest.metadata).expect("json");
    assert_eq!(meta["cairn_entry_id"], t.u1.entry.id.as_str());
    assert_eq!(meta["cairn_thread_id"], "chat");
    let named = &t.u1.entry.metadata[FILE_CHECKPOINT_KEY];
    assert_eq!(named["snapshot_id"], cp.snapshot_id.to_hex());
    assert_eq!(named["root"], real.root().to_string_lossy().as_ref());
    // The thread database lives in the store, which snapshots leave out (on PostgreSQL, it
    // is not a file at all).
    assert_eq!(
        real.ws.store().path().join("threads.db").is_file(),
        !crate::util::on_pg()
    );
}

#[test]
fn a_rewind_restores_real_files_and_its_safety_snapshot_undoes_it() {
    let real = real();
    let t = real_turns(&real);
    let plan = real
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                dry_run: true,
                ..real.files()
            },
        )
        .expect("dry run");
    let planned = plan.files.expect("files");
    assert_eq!(
        planned.restore["restored"],
        serde_json::json!(["src/app.txt"])
    );
    assert_eq!(
        planned.restore["deleted"],
        serde_json::json!(["built-2.txt"])
    );
    assert_eq!(
        real.read("src/app.txt").as_deref(),
        Some("v3"),
        "a dry run changes nothing"
    );

    let r = real
        .threads
        .rewind(&t.thread, &t.a1, &real.files())
        .expect("rewind");
    assert_eq!(
        r.conversation.cut,
        vec![t.u2.entry.id.clone(), t.a2.clone()]
    );
    let files = r.files.expect("files");
    assert!(files.exact);
    assert_eq!(files.restore["restored"], planned.restore["restored"]);
    assert_eq!(files.restore["deleted"], planned.restore["deleted"]);
    assert_eq!(real.read("src/app.txt").as_deref(), Some("v2"));
    assert_eq!(
        real.read("built-1.txt").as_deref(),
        Some("one\n"),
        "made by a shell before the message"
    );
    assert_eq!(real.read("built-2.txt"), None, "made by a shell after it");
    assert_eq!(
        active_ids(&real.threads, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );

    // Undo the file part.
    let safety = files.safety_snapshot_id.expect("a safety snapshot");
    real.ws
        .restore(
            &safety,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("undo");
    assert_eq!(real.read("src/app.txt").as_deref(), Some("v3"));
    assert_eq!(real.read("built-2.txt").as_deref(), Some("two\n"));
}

#[test]
fn rewinding_within_a_turn_restores_the_files_before_it() {
    let real = real();
    let t = real_turns(&real);
    let r = real
        .threads
        .rewind(&t.thread, &t.u2.entry.id, &real.files())
        .expect("rewind");
    assert!(!r.files.expect("files").exact);
    assert_eq!(real.read("src/app.txt").as_deref(), Some("v2"));
    let r = real
        .threads
        .restore_before(&t.thread, &t.u1.entry.id, &real.files())
        .expect("restore before");
    assert_eq!(
        r.conversation.cut.len(),
        3,
        "u1, a1 and u2: a2 was cut before"
    );
    assert_eq!(real.read("src/app.txt").as_deref(), Some("v1"));
    assert_eq!(real.read("built-1.txt"), None);
}

#[test]
fn a_pruned_checkpoint_is_refused_with_validation() {
    let real = real();
    let t = real_turns(&real);
    let cp = t.u2.checkpoint.clone().expect("cp");
    real.ws
        .store()
        .delete_snapshot(&cp.snapshot_id, &cairn_store::gc::GcOptions::default())
        .expect("prune");
    let e = real
        .threads
        .rewind(&t.thread, &t.a1, &real.files())
        .expect_err("refused");
    assert!(e.is_validation(), "{e}");
    assert_eq!(real.read("src/app.txt").as_deref(), Some("v3"));
}

#[test]
fn a_hold_on_the_workspace_refuses_a_file_rewind_with_workspace_busy() {
    let real = real();
    let t = real_turns(&real);
    let hold = real.ws.hold("npm run dev", None).expect("hold");
    assert_eq!(
        kind(real.threads.rewind(&t.thread, &t.a1, &real.files())),
        ErrorKind::WorkspaceBusy
    );
    let plan = real
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                dry_run: true,
                ..real.files()
            },
        )
        .expect("dry run");
    assert_eq!(plan.files.expect("files").restore["busy"], true);
    drop(hold);
    real.threads
        .rewind(&t.thread, &t.a1, &real.files())
        .expect("rewind");
}

#[test]
fn a_run_in_an_overlapping_real_workspace_refuses_a_file_rewind() {
    let real = real();
    let t = real_turns(&real);
    let sub: Arc<Workspace> = Arc::new(open_ws(&real.root().join("packages/sub"), "sub"));
    let other = real
        .threads
        .create_thread(Some("other".into()), serde_json::json!({}))
        .expect("thread")
        .id;
    let run = real
        .threads
        .begin_run(
            &other,
            RunOptions {
                workspace: Some(sub.clone()),
                ..Default::default()
            },
        )
        .expect("run");
    assert_eq!(
        kind(real.threads.rewind(&t.thread, &t.a1, &real.files())),
        ErrorKind::WorkspaceBusy
    );
    real.threads.end_run(&run).expect("end");
    real.threads
        .rewind(&t.thread, &t.a1, &real.files())
        .expect("rewind");
}

#[test]
fn a_forced_rewind_restores_after_a_tool_call_that_outlived_its_run() {
    let real = real();
    let t = real_turns(&real);
    let run = real.run(&t.thread);
    let call = real.threads.tool_start(&run, "slow_build").expect("tool");
    let (threads, root) = (real.threads.clone(), real.root().to_path_buf());
    let tool = {
        let run = run.clone();
        std::thread::spawn(move || {
            eventually("the run to be stopped", || run.is_interrupted());
            // The tool ignores the stop and writes once more, then ends.
            write_in(&root, "src/app.txt", "written by the late tool");
            threads.tool_finish(&call).expect("finish");
        })
    };
    let r = real
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                force: true,
                tool_settle: Duration::from_secs(30),
                ..real.files()
            },
        )
        .expect("forced rewind");
    tool.join().expect("tool");
    assert_eq!(r.runs.interrupted, vec![run.id().clone()]);
    assert_eq!(
        real.read("src/app.txt").as_deref(),
        Some("v2"),
        "restored after the late write"
    );
    let safety = r.files.expect("files").safety_snapshot_id.expect("safety");
    let kept = real.ws.store().read_manifest(&safety).expect("manifest");
    assert!(kept.stats.files > 0);
}

#[test]
fn a_fork_into_another_workspace_copies_the_branch_checkpoints_and_restores_there() {
    let real = real();
    let t = real_turns(&real);
    let other: Arc<Workspace> = Arc::new(open_ws(&real.dir.path().join("fork"), "fork"));
    let plan = real
        .threads
        .fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                files: true,
                dry_run: true,
                workspace: Some(other.clone()),
                source: Some(real.ws.clone()),
                ..Default::default()
            },
        )
        .expect("dry run");
    let u1_snap = t.u1.checkpoint.clone().expect("cp").snapshot_id;
    let u2_snap = t.u2.checkpoint.clone().expect("cp").snapshot_id;
    assert_eq!(plan.snapshots_copied, vec![u1_snap, u2_snap]);
    assert!(
        other.store().snapshot_ids().expect("ids").is_empty(),
        "a dry run leaves nothing there"
    );
    assert_eq!(real.threads.threads().expect("threads").len(), 1);

    let fork = real
        .threads
        .fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                files: true,
                workspace: Some(other.clone()),
                source: Some(real.ws.clone()),
                new_thread_id: Some("chat-2".into()),
                ..Default::default()
            },
        )
        .expect("fork");
    assert_eq!(fork.snapshots_copied, vec![u1_snap, u2_snap]);
    let read = |rel: &str| std::fs::read_to_string(Workspace::root(&other).join(rel)).ok();
    assert_eq!(read("src/app.txt").as_deref(), Some("v2"));
    assert_eq!(read("built-1.txt").as_deref(), Some("one\n"));
    assert_eq!(
        real.read("src/app.txt").as_deref(),
        Some("v3"),
        "the source workspace is untouched"
    );
    // The fork rewinds in its own workspace, from the copied checkpoints.
    write_in(Workspace::root(&other), "src/app.txt", "fork's own work");
    let r = real
        .threads
        .rewind(
            &fork.thread_id,
            &t.u1.entry.id,
            &RewindOptions {
                files: Some(true),
                workspace: Some(other.clone()),
                ..Default::default()
            },
        )
        .expect("rewind the fork");
    assert_eq!(r.files.expect("files").workspace_id, "fork");
    assert_eq!(read("src/app.txt").as_deref(), Some("v1"));
}

#[test]
fn a_fork_refused_by_a_hold_leaves_no_thread_and_no_copied_checkpoint() {
    let real = real();
    let t = real_turns(&real);
    let other: Arc<Workspace> = Arc::new(open_ws(&real.dir.path().join("fork"), "fork"));
    let hold = other.hold("a command", None).expect("hold");
    let r = real.threads.fork(
        &t.thread,
        &t.a1,
        &ForkOptions {
            files: true,
            workspace: Some(other.clone()),
            source: Some(real.ws.clone()),
            new_thread_id: Some("chat-2".into()),
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::WorkspaceBusy);
    drop(hold);
    assert!(other.store().snapshot_ids().expect("ids").is_empty());
    assert_eq!(
        kind(real.threads.thread(&"chat-2".into())),
        ErrorKind::NotFound
    );
}

/// A seam over a real workspace whose restore kills the process: in the middle of the restore
/// (`mid`) or once the files are done, before the conversation switch (`after`).
pub struct Crashing {
    pub ws: Workspace,
    pub mid: bool,
}

impl Files for Crashing {
    fn id(&self) -> &str {
        self.ws.id()
    }
    fn root(&self) -> &Path {
        Workspace::root(&self.ws)
    }
    fn store(&self) -> Option<&cairn_store::Store> {
        Some(self.ws.store())
    }
    fn checkpoint(
        &self,
        r: &cairn_rewind::CheckpointRequest,
    ) -> Result<cairn_store::SnapshotId, cairn_rewind::FilesError> {
        Files::checkpoint(&self.ws, r)
    }
    fn keeps(&self, s: &cairn_store::SnapshotId) -> Result<bool, cairn_rewind::FilesError> {
        Files::keeps(&self.ws, s)
    }
    fn plan(
        &self,
        s: &cairn_store::SnapshotId,
    ) -> Result<cairn_rewind::FilePlan, cairn_rewind::FilesError> {
        Files::plan(&self.ws, s)
    }
    fn apply(
        &self,
        plan: &cairn_rewind::FilePlan,
        key: &str,
    ) -> Result<cairn_rewind::FileOutcome, cairn_rewind::FilesError> {
        if self.mid {
            let options = cairn_restore::ApplyOptions {
                key: Some(key.into()),
                crash_after_ops: Some(1),
                ..Default::default()
            };
            let _ = self.ws.apply(&plan.plan, &options, Default::default());
            unreachable!("killed after one operation");
        }
        let _ = Files::apply(&self.ws, plan, key);
        std::process::abort();
    }
    fn finished(
        &self,
        key: &str,
        t: &cairn_store::SnapshotId,
    ) -> Result<Option<cairn_rewind::FileOutcome>, cairn_rewind::FilesError> {
        Files::finished(&self.ws, key, t)
    }
}

/// The child's side of the crash tests: rewinds `chat` to `to` through [`Crashing`].
pub fn crash_child(dir: &Path, to: &str, mid: bool) {
    let ws = open_ws(&dir.join("project"), "project");
    let threads =
        crate::util::open_in_store(ws.store().path(), ThreadsOptions::default()).expect("open");
    let crashing = Arc::new(Crashing { ws, mid });
    let _ = threads.rewind(
        &"chat".into(),
        &EntryId::new(to),
        &RewindOptions {
            files: Some(true),
            workspace: Some(crashing),
            key: Some("undo".into()),
            ..Default::default()
        },
    );
    unreachable!("the child dies inside the restore");
}

fn crash_in_child(real: &Real, to: &EntryId, mid: bool) -> std::process::ExitStatus {
    let spec =
        serde_json::json!({ "role": "real-crash", "dir": real.dir.path(), "to": to, "mid": mid });
    std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "processes::child",
            "--exact",
            "--include-ignored",
            "--test-threads=1",
            "--quiet",
        ])
        .env("CAIRN_REWIND_CHILD", spec.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the child")
}

fn reopen_both(real: Real) -> (PathBuf, Arc<Workspace>, Threads, tempfile::TempDir) {
    let Real { dir, ws, threads } = real;
    drop(threads);
    drop(ws);
    let ws = Arc::new(open_ws(&dir.path().join("project"), "project"));
    let as_files: Arc<dyn Files> = ws.clone();
    let threads = crate::util::open_in_store(
        ws.store().path(),
        ThreadsOptions {
            workspaces: vec![as_files],
            ..Default::default()
        },
    )
    .expect("reopen");
    (Workspace::root(&ws).to_path_buf(), ws, threads, dir)
}

#[test]
fn a_process_killed_in_the_middle_of_the_restore_is_finished_when_it_is_reopened() {
    let real = real();
    let t = real_turns(&real);
    let status = crash_in_child(&real, &t.a1, true);
    assert!(!status.success());
    assert_eq!(
        active_ids(&real.threads, &t.thread).len(),
        4,
        "the conversation waits for the files"
    );
    let (root, ws, threads, _dir) = reopen_both(real);
    assert_eq!(
        ws.recovered().len(),
        1,
        "opening the workspace finished the restore journal"
    );
    assert!(ws.recovered()[0].completed);
    assert_eq!(
        std::fs::read_to_string(root.join("src/app.txt")).expect("read"),
        "v2"
    );
    assert!(!root.join("built-2.txt").exists());
    assert_eq!(
        active_ids(&threads, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    let records = threads.rewinds(&t.thread).expect("records");
    assert_eq!(
        (records[0].state.as_str(), records[0].key.as_deref()),
        ("completed", Some("undo"))
    );
    // Repeating the key returns the result, recovered.
    let ws_files: Arc<dyn Files> = ws.clone();
    let again = threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                files: Some(true),
                workspace: Some(ws_files),
                key: Some("undo".into()),
                ..Default::default()
            },
        )
        .expect("the same key");
    assert!(again.recovered);
    assert!(again.files.expect("files").safety_snapshot_id.is_some());
}

#[test]
fn a_process_killed_between_the_files_and_the_conversation_switch_is_finished_when_reopened() {
    let real = real();
    let t = real_turns(&real);
    let status = crash_in_child(&real, &t.a1, false);
    assert!(!status.success());
    assert_eq!(
        real.read("src/app.txt").as_deref(),
        Some("v2"),
        "the files were done"
    );
    let (_root, ws, threads, _dir) = reopen_both(real);
    assert!(ws.recovered().is_empty(), "the restore itself had finished");
    assert_eq!(
        active_ids(&threads, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    let events = threads.events_since(0, 10_000).expect("events");
    let last = events.last().expect("an event");
    assert_eq!(last.kind, cairn_rewind::EventKind::RewindCompleted);
    assert_eq!(last.data["recovered"], true);
}

/// A rewind killed after its restore's first operation, then every path the restore has still
/// to change edited by someone else, then both reopened: returns what reopening left, and the
/// paths in the way.
fn cut_then_obstructed() -> (
    RealTurns,
    PathBuf,
    Arc<Workspace>,
    Threads,
    tempfile::TempDir,
    Vec<&'static str>,
) {
    let real = real();
    let t = real_turns(&real);
    assert!(!crash_in_child(&real, &t.a1, true).success());
    let mut in_way = Vec::new();
    if real.root().join("built-2.txt").exists() {
        real.write("built-2.txt", "someone's edit\n");
        in_way.push("built-2.txt");
    }
    if real.read("src/app.txt").as_deref() != Some("v2") {
        real.write("src/app.txt", "someone's edit\n");
        in_way.push("src/app.txt");
    }
    assert!(!in_way.is_empty(), "the restore had paths left to change");
    let (root, ws, threads, dir) = reopen_both(real);
    (t, root, ws, threads, dir, in_way)
}

#[test]
fn a_rewind_whose_restore_was_cut_then_obstructed_says_the_files_are_part_restored_and_finishes_with_the_recovery(
) {
    let (t, root, ws, threads, _dir, in_way) = cut_then_obstructed();
    assert!(!ws.recovered()[0].completed, "the edits stop the recovery");
    let records = threads.rewinds(&t.thread).expect("records");
    assert_eq!(records[0].state, "started", "neither failed nor completed");
    let message = records[0].error.as_deref().unwrap_or_default();
    assert!(
        message.contains("part restored") && message.contains("cairn recover"),
        "{message}"
    );
    assert_eq!(
        active_ids(&threads, &t.thread).len(),
        4,
        "the conversation waits for the files"
    );
    // Moved aside, as the advice says: the restore's recovery finishes, and with it the rewind,
    // conversation included.
    for p in &in_way {
        std::fs::remove_file(root.join(p)).expect("move aside");
    }
    assert!(ws.recover().expect("recover")[0].completed);
    let ws_files: Arc<dyn Files> = ws.clone();
    let rec = threads.recover(&[ws_files]).expect("recover the rewind");
    assert_eq!(rec.completed.len(), 1, "{rec:?}");
    assert_eq!(
        active_ids(&threads, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("src/app.txt")).expect("read"),
        "v2"
    );
    assert!(!root.join("built-2.txt").exists());
    let records = threads.rewinds(&t.thread).expect("records");
    assert_eq!(records[0].state, "completed");
}

#[test]
fn a_rewind_whose_cut_restore_is_given_up_fails_saying_the_files_are_part_restored_and_how_to_undo()
{
    let (t, _root, ws, threads, _dir, _) = cut_then_obstructed();
    let given = ws.give_up().expect("give up");
    assert!(given[0].abandoned);
    let ws_files: Arc<dyn Files> = ws.clone();
    let rec = threads.recover(&[ws_files]).expect("recover the rewind");
    assert_eq!(rec.failed.len(), 1, "{rec:?}");
    let records = threads.rewinds(&t.thread).expect("records");
    assert_eq!(records[0].state, "failed");
    let message = records[0].error.as_deref().unwrap_or_default();
    assert!(
        message.contains("given up")
            && message.contains("part restored")
            && message.contains("cairn restore"),
        "{message}"
    );
    assert_eq!(active_ids(&threads, &t.thread).len(), 4);
}
