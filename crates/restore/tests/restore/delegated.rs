//! Restores a `cairn watch` daemon carries out for other processes (issue 56): a
//! `Workspace::restore` with a daemon of its workspace running hands the restore to it (which
//! holds the indexes, the stat cache and the watcher already) and reports what it did, or how
//! it failed, as its own; the daemon makes the changes durable right after it answers; a
//! restore it must not carry out is done by the asking process.

use crate::ahead::{wait_for, with_daemon};
use crate::fixtures::Fx;
use cairn_restore::{watch, ApplyOptions, Context, DriftPolicy, JournalState, PlanOptions};
use cairn_store::{Classify, ErrorKind, RelPath};
use std::time::Duration;

/// The racy window of the daemons here.
const RACY: Duration = Duration::from_millis(20);

/// How many restores the daemon of `fx`'s workspace carried out.
fn restores(fx: &Fx) -> u64 {
    watch::status(fx.ws.store(), fx.ws.id())
        .expect("ask the daemon")
        .expect("a daemon answers")
        .restores
}

/// A tree, its snapshot, then an agent's edits: a change, a deletion and a new file.
fn edited(fx: &Fx) -> cairn_store::SnapshotId {
    fx.write("a.txt", b"a\n");
    fx.write("d/b.txt", b"b\n");
    let first = fx.snap().id;
    fx.write("a.txt", b"edited\n");
    fx.write("d/new.txt", b"new\n");
    std::fs::remove_file(fx.root().join("d/b.txt")).expect("delete");
    first
}

#[test]
fn a_restore_with_a_cairn_watch_daemon_is_carried_out_by_it_made_durable_by_it_and_undone_exactly()
{
    let fx = Fx::new();
    let first = edited(&fx);
    let edits = fx.picture();
    with_daemon(&fx, RACY, || {
        assert_eq!(restores(&fx), 0);
        let report = fx.restore(&first);
        assert_eq!(restores(&fx), 1, "the daemon carried it out");
        assert!(report.as_planned, "{report:?}");
        let names = |v: &[RelPath]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&report.summary.restored), ["a.txt", "d/b.txt"]);
        assert_eq!(names(&report.summary.deleted), ["d/new.txt"]);
        assert_eq!(fx.read("a.txt"), b"a\n");
        assert_eq!(fx.read("d/b.txt"), b"b\n");
        assert!(!fx.root().join("d/new.txt").exists());
        // Nothing in this process confirms the journal: the daemon does, right after it
        // answered.
        wait_for(
            || {
                let journals = fx.ws.journals().expect("journals");
                !journals.is_empty() && journals.iter().all(|j| j.state == JournalState::Done)
            },
            "the daemon to make the restore durable",
        );
        // Its safety snapshot undoes it, through the daemon too.
        let safety = report.safety_snapshot_id.expect("a safety snapshot");
        fx.restore(&safety);
        assert_eq!(restores(&fx), 2);
        assert_eq!(fx.picture(), edits, "the undo is exact");
    });
}

#[test]
fn a_restore_the_daemon_refuses_fails_here_with_its_kind_message_and_path_and_changes_nothing() {
    let fx = Fx::new();
    let first = edited(&fx);
    let reference = fx.snap().id;
    let edits = fx.picture();
    with_daemon(&fx, RACY, || {
        let hold = fx.ws.hold("a build", None).expect("a hold");
        let err = fx
            .ws
            .restore(
                &first,
                &PlanOptions::default(),
                &ApplyOptions::default(),
                Context::default(),
            )
            .expect_err("refused while a hold stands");
        assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
        assert!(err.to_string().contains("busy"), "{err}");
        assert_eq!(restores(&fx), 1, "the daemon tried it");
        assert_eq!(fx.picture(), edits, "nothing changed");
        drop(hold);
        // Someone edits a file the restore would write over since the reference: refused
        // with CONFLICT, naming the file and its path.
        fx.write("a.txt", b"someone else's\n");
        let err = fx
            .ws
            .restore(
                &first,
                &PlanOptions {
                    reference: Some(reference),
                    on_drift: DriftPolicy::Refuse,
                    ..PlanOptions::default()
                },
                &ApplyOptions::default(),
                Context::default(),
            )
            .expect_err("refused for the drift");
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        assert!(err.to_string().contains("a.txt"), "{err}");
        assert_eq!(err.path(), Some(fx.root().join("a.txt").as_path()), "{err}");
        assert_eq!(restores(&fx), 2);
        assert_eq!(fx.read("a.txt"), b"someone else's\n", "nothing changed");
    });
}

// The daemon's handle keeps out only its own files: one the asking handle keeps out beneath
// the root (a thread database given with `--threads-db`) would be deleted by the daemon's
// restore, which does not know it. The asking process restores itself.
#[test]
fn a_restore_from_a_handle_that_keeps_out_a_file_the_daemon_does_not_is_done_by_that_handle() {
    let fx = Fx::new();
    fx.write("threads.db", b"database\n");
    fx.ws.keep_out(&fx.root().join("threads.db"));
    let first = edited(&fx);
    fx.write("threads.db", b"database, later\n");
    with_daemon(&fx, RACY, || {
        let report = fx.restore(&first);
        assert_eq!(restores(&fx), 0, "the daemon left it to this process");
        assert!(report.as_planned, "{report:?}");
        assert_eq!(fx.read("a.txt"), b"a\n");
        assert_eq!(fx.read("threads.db"), b"database, later\n", "kept out");
    });
}

// A daemon killed midway leaves its journal pending; the asking process then restores itself.
// It finishes that journal, the same restore, and reports it as the daemon would have: its
// safety snapshot named (not "nothing to do", the files being already as the snapshot holds
// them). The death is the daemon's test hook (`watch::dying`): one in this process cannot be
// killed.
#[test]
fn a_restore_whose_daemon_dies_midway_is_finished_here_and_reported_with_its_safety_snapshot() {
    let fx = Fx::new();
    let first = edited(&fx);
    let edits = fx.picture();
    with_daemon(&fx, RACY, || {
        watch::dying::next_restore(&fx.root(), 1);
        let report = fx.restore(&first);
        assert_eq!(restores(&fx), 0, "the daemon never answered");
        assert_eq!(fx.read("a.txt"), b"a\n");
        assert_eq!(fx.read("d/b.txt"), b"b\n");
        assert!(!fx.root().join("d/new.txt").exists());
        let names = |v: &[RelPath]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(&report.summary.restored),
            ["a.txt", "d/b.txt"],
            "{report:?}"
        );
        assert_eq!(names(&report.summary.deleted), ["d/new.txt"], "{report:?}");
        let safety = report
            .safety_snapshot_id
            .expect("the daemon's safety snapshot, reported");
        let journals = fx.ws.journals().expect("journals");
        assert_eq!(
            journals.len(),
            1,
            "one restore, finished here: {journals:?}"
        );
        assert_eq!(journals[0].safety, Some(safety));
        // It undoes the restore exactly.
        fx.restore(&safety);
        assert_eq!(fx.picture(), edits, "the undo is exact");
    });
}
