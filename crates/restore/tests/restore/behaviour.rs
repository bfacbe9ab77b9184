//! Restore behaviour: plans, kept paths, refusals, holds, safety snapshots, drift, journals.

use crate::fixtures::{chmod, mtime_ns, temp_files, Fx};
use cairn_restore::{ApplyOptions, Context, DriftPolicy, KeptReason, PlanOptions, Report};
use cairn_store::{Classify, ErrorKind, RelPath};

fn names(paths: &[RelPath]) -> Vec<String> {
    paths.iter().map(|p| p.display().into_owned()).collect()
}

#[test]
fn a_dry_run_lists_every_change_and_apply_does_exactly_that() {
    let fx = Fx::new();
    fx.write("keep.txt", b"keep");
    fx.write("mod.txt", b"original");
    fx.write("del/me.txt", b"x");
    let snap = fx.snap();
    fx.write("mod.txt", b"changed");
    fx.write("new/dir/file.txt", b"new");
    std::fs::remove_dir_all(fx.root().join("del")).expect("rm");
    let before = fx.picture();
    let plan = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .expect("plan");
    assert_eq!(fx.picture(), before, "a plan changes nothing");
    assert_eq!(
        names(&plan.summary.restored),
        vec!["del", "del/me.txt", "mod.txt"]
    );
    assert_eq!(
        names(&plan.summary.deleted),
        vec!["new/dir/file.txt", "new/dir", "new"]
    );
    assert_eq!(plan.summary.unchanged, 1);
    let dry = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .map(|plan| Report::dry_run(&plan))
        .expect("dry run");
    assert!(dry.dry_run);
    assert_eq!(dry.summary.restored, plan.summary.restored);
    assert_eq!(fx.picture(), before);
    let report = fx
        .ws
        .apply(&plan, &ApplyOptions::default(), Context::default())
        .expect("apply");
    assert!(report.as_planned);
    assert_eq!(report.summary.restored, plan.summary.restored);
    assert_eq!(report.summary.deleted, plan.summary.deleted);
    assert_eq!(report.operations, plan.actions.len() as u64);
    assert_eq!(fx.read("mod.txt"), b"original");
    assert_eq!(fx.read("del/me.txt"), b"x");
    assert!(!fx.root().join("new").exists());
    assert!(temp_files(&fx.root()).is_empty());
}

#[test]
fn files_that_already_match_are_not_touched_and_keep_their_mtime() {
    let fx = Fx::new();
    fx.write("same.txt", b"same");
    fx.write("other.txt", b"v1");
    let snap = fx.snap();
    fx.write("other.txt", b"v2");
    let before = mtime_ns(&fx.root().join("same.txt"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    fx.ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert_eq!(mtime_ns(&fx.root().join("same.txt")), before);
    assert_eq!(fx.read("other.txt"), b"v1");
}

#[test]
fn restoring_the_safety_snapshot_undoes_the_restore() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    fx.write("a.txt", b"two");
    fx.write("b/c.txt", b"three");
    let mutated = fx.picture();
    let report = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    let safety = report.safety_snapshot_id.expect("safety snapshot");
    assert_ne!(fx.picture(), mutated);
    fx.ws
        .restore(
            &safety,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("undo");
    assert_eq!(fx.picture(), mutated);
}

#[test]
fn a_restore_that_changes_nothing_takes_no_safety_snapshot() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    let report = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert!(report.safety_snapshot_id.is_none());
    assert_eq!(report.operations, 0);
    assert_eq!(fx.ws.store().snapshot_ids().expect("ids").len(), 1);
}

#[test]
fn a_restore_refused_after_its_safety_snapshot_but_before_any_change_keeps_no_safety_snapshot() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    fx.write("a.txt", b"two");
    let plan = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .expect("plan");
    // The files change between the plan and its apply (a new file the plan does not know):
    // the safety snapshot sees it and the apply is refused with nothing changed.
    fx.write("new.txt", b"made after the plan");
    let before = fx.ws.store().snapshot_ids().expect("ids").len();
    let err = fx
        .ws
        .apply(&plan, &ApplyOptions::default(), Context::default())
        .expect_err("the plan no longer holds");
    assert_eq!(
        std::fs::read(fx.root().join("a.txt")).expect("read"),
        b"two"
    );
    assert!(fx.root().join("new.txt").exists());
    assert_eq!(
        fx.ws.store().snapshot_ids().expect("ids").len(),
        before,
        "{err}: a safety snapshot of files that did not change was kept"
    );
    // And the next restore works from a stat cache that no longer names it.
    fx.ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert_eq!(
        std::fs::read(fx.root().join("a.txt")).expect("read"),
        b"one"
    );
}

#[test]
fn excluded_ignored_and_special_paths_are_kept_with_what_holds_them() {
    let fx = Fx::new();
    fx.write(".gitignore", b"*.log\nbuild/\n");
    fx.write("src/a.rs", b"a");
    let snap = fx.snap();
    fx.write("debug.log", b"log");
    fx.write("build/out.o", b"obj");
    fx.write("node_modules/x/index.js", b"js");
    fx.write("gen/made.rs", b"generated");
    fx.write("gen/trace.log", b"log");
    let plan = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .expect("plan");
    assert_eq!(names(&plan.summary.deleted), vec!["gen/made.rs"]);
    let kept: Vec<(String, KeptReason)> = plan
        .summary
        .kept
        .iter()
        .map(|k| (k.path.display().into_owned(), k.reason))
        .collect();
    assert!(kept.contains(&("debug.log".into(), KeptReason::Ignored)));
    assert!(kept.contains(&("build".into(), KeptReason::Ignored)));
    assert!(kept.contains(&("node_modules".into(), KeptReason::Excluded)));
    assert!(kept.contains(&("gen".into(), KeptReason::HoldsKept)));
    fx.ws
        .apply(&plan, &ApplyOptions::default(), Context::default())
        .expect("apply");
    assert_eq!(fx.read("debug.log"), b"log");
    assert_eq!(fx.read("build/out.o"), b"obj");
    assert_eq!(fx.read("gen/trace.log"), b"log");
    assert!(!fx.root().join("gen/made.rs").exists());
}

#[test]
fn a_file_made_since_that_is_too_large_for_the_snapshot_is_kept() {
    let fx = Fx::new();
    fx.write("a.txt", b"a");
    let snap = fx
        .ws
        .snapshot(
            &cairn_snapshot::Options {
                capture: cairn_snapshot::CaptureSettings {
                    max_file_bytes: 1000,
                    ..fx.ws.snapshot_options().capture
                },
                ..fx.ws.snapshot_options()
            },
            Context::default(),
        )
        .expect("snap");
    fx.write("big.bin", &[1u8; 5000]);
    let plan = fx
        .ws
        .plan(
            &snap.snapshot.id,
            &PlanOptions::default(),
            Context::default(),
        )
        .expect("plan");
    assert!(plan.summary.deleted.is_empty());
    assert!(plan
        .summary
        .kept
        .iter()
        .any(|k| k.path.0 == b"big.bin" && k.reason == KeptReason::TooLarge));
}

#[test]
fn overwriting_a_present_ignored_file_is_denied_naming_it() {
    let fx = Fx::new();
    fx.write("notes.log", b"from the snapshot");
    let snap = fx.snap();
    fx.write(".gitignore", b"*.log\n");
    fx.write("notes.log", b"precious, ignored now");
    let before = fx.picture();
    let err = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .map(|plan| Report::dry_run(&plan))
        .expect_err("denied");
    assert_eq!(err.kind(), ErrorKind::Denied);
    assert!(err.to_string().contains("notes.log"), "{err}");
    let err = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect_err("denied");
    assert_eq!(err.kind(), ErrorKind::Denied);
    assert_eq!(fx.picture(), before);
}

#[test]
fn a_directory_owned_by_another_user_refuses_the_restore_before_any_change() {
    if !rustix::process::geteuid().is_root() {
        return; // chown needs root; the rule is exercised where the suite runs as root (CI).
    }
    let fx = Fx::new();
    fx.write("theirs/a.txt", b"a");
    let snap = fx.snap();
    fx.write("theirs/a.txt", b"b");
    std::os::unix::fs::chown(fx.root().join("theirs"), Some(65534), Some(65534)).expect("chown");
    let err = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .map(|plan| Report::dry_run(&plan))
        .expect_err("denied");
    assert_eq!(err.kind(), ErrorKind::Denied);
    assert_eq!(fx.read("theirs/a.txt"), b"b");
}

#[test]
fn a_read_only_directory_of_yours_is_opened_for_the_restore_and_given_its_mode() {
    let fx = Fx::new();
    fx.write("ro/a.txt", b"one");
    chmod(&fx.root().join("ro"), 0o555);
    let snap = fx.snap();
    chmod(&fx.root().join("ro"), 0o755);
    fx.write("ro/a.txt", b"two");
    fx.write("ro/b.txt", b"new");
    chmod(&fx.root().join("ro"), 0o500);
    fx.ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fx.read("ro/a.txt"), b"one");
    assert!(!fx.root().join("ro/b.txt").exists());
    assert_eq!(
        std::fs::metadata(fx.root().join("ro"))
            .expect("stat")
            .mode()
            & 0o777,
        0o555
    );
    chmod(&fx.root().join("ro"), 0o755);
}

#[test]
fn a_hold_makes_a_restore_busy_and_a_dry_run_says_so() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    fx.write("a.txt", b"two");
    let hold = fx.ws.hold("npm test", None).expect("hold");
    let dry = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .map(|plan| Report::dry_run(&plan))
        .expect("dry run");
    assert!(dry.summary.busy);
    let err = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect_err("busy");
    assert_eq!(err.kind(), ErrorKind::Busy);
    assert!(err.to_string().contains("npm test"), "{err}");
    assert_eq!(fx.read("a.txt"), b"two");
    drop(hold);
    fx.ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert_eq!(fx.read("a.txt"), b"one");
}

#[test]
#[allow(unsafe_code)]
fn a_hold_released_while_other_threads_fork_children_does_not_refuse_the_next_restore() {
    // In an agent's process another thread may fork a child at any moment: until it execs,
    // the child holds copies of every descriptor, and with them their locks. A lock released
    // by closing its descriptor stood until then, and a restore just after a hold was refused
    // as BUSY (seen once in CI under load). Here a thread keeps a child in that state almost
    // all the time; every lock must end when its holder releases it.
    use std::os::unix::process::CommandExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let one = fx.snap();
    fx.write("a.txt", b"two");
    let two = fx.snap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    // A descriptor is copied only by a fork made while it is open: many short-lived forks
    // from several threads hit the moments a hold has its locks open.
    let forkers: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut cmd = std::process::Command::new("true");
                    // SAFETY: the closure only sleeps (async-signal-safe: nanosleep).
                    unsafe {
                        cmd.pre_exec(|| {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                            Ok(())
                        });
                    }
                    let _ = cmd.status();
                }
            })
        })
        .collect();
    let mut result = Ok(());
    for i in 0..100 {
        let hold = fx.ws.hold("npm test", None).expect("hold");
        drop(hold);
        let (snap, want): (_, &[u8]) = if i % 2 == 0 {
            (&one, b"one")
        } else {
            (&two, b"two")
        };
        match fx.ws.restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        ) {
            Ok(_) => assert_eq!(fx.read("a.txt"), want),
            Err(e) => {
                result = Err(format!("round {i}: {e}"));
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for f in forkers {
        f.join().expect("a forking thread ends");
    }
    result.expect("every restore after a released hold runs");
}

#[test]
fn a_hold_naming_a_process_lasts_until_that_process_exits() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    drop(
        fx.ws
            .hold("background server", Some(child.id()))
            .expect("hold"),
    );
    let err = fx.ws.restore(
        &snap.id,
        &PlanOptions::default(),
        &ApplyOptions::default(),
        Context::default(),
    );
    // Nothing to change is fine either way; make a change so the restore must act.
    let _ = err;
    fx.write("a.txt", b"two");
    let err = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect_err("busy");
    assert_eq!(err.kind(), ErrorKind::Busy);
    child.kill().expect("kill");
    child.wait().expect("wait");
    fx.ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert!(fx.ws.holds().expect("holds").is_empty());
}

#[test]
fn a_hold_in_another_process_makes_a_restore_busy() {
    // The hold file is shared through the store: a second handle on the same store sees it.
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    fx.write("a.txt", b"two");
    let other = crate::fixtures::open(fx.dir.path());
    let hold = other.hold("tool call", None).expect("hold");
    assert_eq!(
        fx.ws
            .restore(
                &snap.id,
                &PlanOptions::default(),
                &ApplyOptions::default(),
                Context::default()
            )
            .expect_err("busy")
            .kind(),
        ErrorKind::Busy
    );
    drop(hold);
}

#[test]
fn a_plan_applied_later_is_checked_again_with_its_own_drift_policy() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let target = fx.snap();
    fx.write("a.txt", b"agent edit");
    let reference = fx.snap();
    fx.write("a.txt", b"someone else's edit");
    // Its only change would be to a drifted path it keeps: it has nothing to do.
    let keep = PlanOptions {
        reference: Some(reference.id),
        on_drift: DriftPolicy::Skip,
        ..PlanOptions::default()
    };
    let plan = fx
        .ws
        .plan(&target.id, &keep, Context::default())
        .expect("plan");
    assert!(plan.is_noop());
    assert_eq!(names(&plan.summary.drifted), vec!["a.txt"]);
    // Applied with default options, it is checked as it was planned (keep), not with
    // `overwrite`, which would find a change and refuse the plan as out of date.
    let report = fx
        .ws
        .apply(&plan, &ApplyOptions::default(), Context::default())
        .expect("apply");
    assert_eq!(report.operations, 0);
    assert_eq!(fx.read("a.txt"), b"someone else's edit");
}

#[test]
fn drift_from_a_reference_is_reported_refused_or_skipped_as_asked() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    fx.write("b.txt", b"one");
    let target = fx.snap();
    fx.write("a.txt", b"agent edit");
    fx.write("b.txt", b"agent edit");
    let reference = fx.snap();
    fx.write("b.txt", b"someone else's edit");
    let opts = |on_drift| PlanOptions {
        reference: Some(reference.id),
        on_drift,
        ..PlanOptions::default()
    };
    let plan = fx
        .ws
        .plan(
            &target.id,
            &opts(DriftPolicy::Overwrite),
            Context::default(),
        )
        .expect("plan");
    assert_eq!(names(&plan.summary.drifted), vec!["b.txt"]);
    let err = fx
        .ws
        .plan(&target.id, &opts(DriftPolicy::Refuse), Context::default())
        .expect_err("conflict");
    assert_eq!(err.kind(), ErrorKind::Conflict);
    let report = fx
        .ws
        .restore(
            &target.id,
            &opts(DriftPolicy::Skip),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert_eq!(names(&report.summary.drifted), vec!["b.txt"]);
    assert_eq!(fx.read("a.txt"), b"one");
    assert_eq!(fx.read("b.txt"), b"someone else's edit");
}

#[test]
fn a_plan_made_before_the_files_changed_is_refused_with_conflict() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    fx.write("a.txt", b"two");
    let plan = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .expect("plan");
    fx.write("c.txt", b"made after the plan");
    let err = fx
        .ws
        .apply(&plan, &ApplyOptions::default(), Context::default())
        .expect_err("conflict");
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(fx.read("a.txt"), b"two");
    assert_eq!(fx.read("c.txt"), b"made after the plan");
}

/// Flips a byte near the end of the store's one large object.
fn damage_the_large_object(fx: &Fx) {
    let large = fx.ws.store().layout().large.clone();
    let obj = std::fs::read_dir(&large)
        .expect("large")
        .next()
        .expect("one")
        .expect("entry")
        .path();
    let mut bytes = std::fs::read(&obj).expect("read");
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    std::fs::write(&obj, bytes).expect("write");
}

#[test]
fn a_corrupt_object_fails_the_restore_with_io_before_any_change() {
    let fx = Fx::new();
    fx.write("a.txt", &vec![b'a'; 3 << 20]);
    fx.write("b.txt", b"small");
    let snap = fx.snap();
    fx.write("a.txt", b"changed");
    std::fs::remove_file(fx.root().join("b.txt")).expect("rm");
    // Flip a byte in the large object's file.
    damage_the_large_object(&fx);
    let before = fx.picture();
    let err = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect_err("io");
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    assert_eq!(fx.picture(), before);
    assert!(temp_files(&fx.root()).is_empty());
    assert!(fx.ws.journals().expect("journals").is_empty());
}

#[test]
fn repeating_a_finished_key_returns_the_earlier_report() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    fx.write("a.txt", b"two");
    let opts = ApplyOptions {
        key: Some("rewind-42".into()),
        ..ApplyOptions::default()
    };
    let restore = || {
        fx.ws
            .restore(&snap.id, &PlanOptions::default(), &opts, Context::default())
    };
    let first = restore().expect("restore");
    fx.write("a.txt", b"three");
    let again = restore().expect("again");
    // The same report, less the walk: the repeat walked nothing.
    assert_eq!(
        first.safety_walk.as_ref().map(|w| w.walked),
        Some(cairn_snapshot::Walked::Full)
    );
    assert_eq!(
        again,
        Report {
            safety_walk: None,
            ..first
        }
    );
    assert_eq!(fx.read("a.txt"), b"three");
}

#[test]
fn a_directory_replaced_by_a_file_is_deleted_with_everything_in_it() {
    let fx = Fx::new();
    fx.write("x", b"a file");
    let snap = fx.snap();
    std::fs::remove_file(fx.root().join("x")).expect("rm");
    fx.write("x/inner/deep.txt", b"deep");
    let plan = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .expect("plan");
    assert_eq!(
        names(&plan.summary.deleted),
        vec!["x/inner/deep.txt", "x/inner", "x"]
    );
    fx.ws
        .apply(&plan, &ApplyOptions::default(), Context::default())
        .expect("apply");
    assert_eq!(fx.read("x"), b"a file");
}

#[test]
fn the_snapshot_being_restored_is_pinned_against_retention_while_it_runs() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    let op = fx
        .ws
        .store()
        .begin_operation(cairn_store::OperationKind::Restore, &[snap.id])
        .expect("marker");
    let pruned = fx
        .ws
        .store()
        .prune(
            &cairn_store::retain::Retention {
                count: Some(0),
                ..Default::default()
            },
            &cairn_store::gc::GcOptions::default(),
        )
        .expect("prune");
    assert!(pruned.deleted.is_empty());
    drop(op);
}

#[test]
fn a_restore_whose_every_change_is_a_skipped_drift_changes_nothing_and_succeeds() {
    let fx = Fx::new();
    fx.write("a.txt", b"v1");
    let target = fx.snap();
    fx.write("a.txt", b"v2");
    let reference = fx.snap();
    fx.write("a.txt", b"someone else's v3");
    let report = fx
        .ws
        .restore(
            &target.id,
            &PlanOptions {
                reference: Some(reference.id),
                on_drift: DriftPolicy::Skip,
                ..PlanOptions::default()
            },
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert_eq!(names(&report.summary.drifted), vec!["a.txt"]);
    assert_eq!(report.operations, 0);
    assert_eq!(fx.read("a.txt"), b"someone else's v3");
}

#[test]
fn a_plan_counts_the_files_of_untouched_directories_as_unchanged_without_listing_them() {
    let fx = Fx::new();
    for i in 0..30 {
        fx.write(&format!("a/b{}/f{i}.txt", i % 4), format!("{i}").as_bytes());
    }
    fx.write("c/link-target.txt", b"t");
    std::os::unix::fs::symlink("link-target.txt", fx.root().join("c/link")).expect("symlink");
    fx.write("c/changed.txt", b"before");
    let snap = fx.snap();
    fx.write("c/changed.txt", b"after");
    let plan = fx
        .ws
        .plan(&snap.id, &PlanOptions::default(), Context::default())
        .expect("plan");
    assert_eq!(names(&plan.summary.restored), vec!["c/changed.txt"]);
    // 30 files under a/, the link and its target.
    assert_eq!(plan.summary.unchanged, 32);
}

#[test]
fn a_corrupt_object_inside_a_directory_the_restore_makes_leaves_nothing_behind() {
    let fx = Fx::new();
    fx.write("new/deeper/a.txt", &vec![b'a'; 3 << 20]);
    fx.write("new/b.txt", b"small");
    fx.write("kept.txt", b"kept");
    let snap = fx.snap();
    std::fs::remove_dir_all(fx.root().join("new")).expect("rm");
    damage_the_large_object(&fx);
    let before = fx.picture();
    let err = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect_err("io");
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    // No directory made, no staged directory left.
    assert_eq!(fx.picture(), before);
    assert!(temp_files(&fx.root()).is_empty());
    let names: Vec<_> = std::fs::read_dir(fx.root())
        .expect("root")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("kept.txt")]);
    assert!(fx.ws.journals().expect("journals").is_empty());
}

#[test]
fn a_directory_the_restore_makes_is_put_in_place_whole_with_its_modes() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    fx.write("new/deeper/a.sh", b"#!/bin/sh\n");
    fx.write("new/b.txt", b"b");
    std::fs::set_permissions(
        fx.root().join("new/deeper/a.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::os::unix::fs::symlink("b.txt", fx.root().join("new/link")).expect("symlink");
    std::fs::set_permissions(
        fx.root().join("new/deeper"),
        std::fs::Permissions::from_mode(0o555),
    )
    .expect("chmod");
    let snap = fx.snap();
    let want = fx.picture();
    std::fs::set_permissions(
        fx.root().join("new/deeper"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::fs::remove_dir_all(fx.root().join("new")).expect("rm");
    let report = fx
        .ws
        .restore(
            &snap.id,
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("restore");
    assert_eq!(fx.picture(), want);
    assert!(temp_files(&fx.root()).is_empty());
    // The safety snapshot (which has no `new`) undoes it.
    fx.ws
        .restore(
            &report.safety_snapshot_id.expect("safety"),
            &PlanOptions::default(),
            &ApplyOptions::default(),
            Context::default(),
        )
        .expect("undo");
    assert!(!fx.root().join("new").exists());
}

#[test]
fn a_finished_journal_is_set_aside_and_not_read_when_the_workspace_opens() {
    let fx = Fx::new();
    fx.write("a.txt", b"one");
    let snap = fx.snap();
    fx.write("a.txt", b"two");
    let opts = ApplyOptions {
        key: Some("k1".into()),
        ..ApplyOptions::default()
    };
    let report = fx
        .ws
        .restore(&snap.id, &PlanOptions::default(), &opts, Context::default())
        .expect("restore");
    let dir = fx.ws.store().layout().journal.join(fx.ws.id());
    let names = || {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("journal dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // The restore returns once its changes are made; the next recovery (any restore or
    // opening of the workspace) makes them durable and sets the journal aside.
    let applied = names();
    assert_eq!(applied.len(), 1, "{applied:?}");
    assert!(applied[0].ends_with(".applied"), "{applied:?}");
    assert!(fx.ws.recover().expect("recover").is_empty());
    let done = names();
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(done[0].ends_with(".done"), "{done:?}");
    // Its key still finds it, and repeating the key returns the same report.
    let j = fx.ws.journal_for_key("k1").expect("read").expect("found");
    let report = Report {
        safety_walk: None,
        ..report
    };
    assert_eq!(j.report.as_ref(), Some(&report));
    let again = fx
        .ws
        .restore(&snap.id, &PlanOptions::default(), &opts, Context::default());
    assert_eq!(again.expect("again"), report);
    // A damaged finished journal does not stop recovery, which reads only unfinished ones...
    std::fs::write(dir.join("r-damaged.done"), b"not a journal").expect("write");
    assert!(fx.ws.recover().expect("recover").is_empty());
    // ...while a damaged unfinished one is reported.
    std::fs::write(dir.join("r-damaged2.journal"), b"not a journal").expect("write");
    assert_eq!(
        fx.ws.recover().expect_err("corrupt").kind(),
        ErrorKind::Corrupt
    );
}

#[test]
fn a_workspace_opens_while_restores_finish_beside_it() {
    // Each restore moves its journal from `<id>.staging` to `<id>.journal` to `<id>.applied`,
    // and the next one (or an opening) to `<id>.done`; a workspace opening meanwhile lists the
    // journal directory and then reads what it listed. A journal gone between the two is read
    // under its later name (or was abandoned), not an error. (The window
    // is narrow: this is a stress test; `journal::tests` checks the same case exactly.)
    let fx = Fx::new();
    fx.write("a.txt", b"one\n");
    let first = fx.snap();
    fx.write("a.txt", b"two\n");
    let second = fx.snap();
    std::thread::scope(|s| {
        let restorer = s.spawn(|| {
            for i in 0..150 {
                let target = if i % 2 == 0 { &first.id } else { &second.id };
                // An opening handle that finds a journal pending takes the restore lock for a
                // moment to look at it; a restore starting then is refused with BUSY, and
                // tried again as that error says.
                loop {
                    match fx.ws.restore(
                        target,
                        &PlanOptions::default(),
                        &ApplyOptions::default(),
                        Context::default(),
                    ) {
                        Ok(_) => break,
                        Err(e) if e.kind() == ErrorKind::Busy => std::thread::yield_now(),
                        Err(e) => panic!("restore: {e}"),
                    }
                }
            }
        });
        let mut opened = 0;
        while !restorer.is_finished() {
            let ws = crate::fixtures::open(fx.dir.path());
            assert!(ws.journals().is_ok());
            opened += 1;
        }
        restorer.join().expect("the restorer");
        assert!(opened > 0);
    });
}

#[test]
fn snapshots_taken_without_a_daemon_merge_the_small_packs_they_leave_and_every_snapshot_still_restores(
) {
    let fx = Fx::new();
    let packs_dir = fx.dir.path().join("store/objects/packs");
    let count_packs = || {
        std::fs::read_dir(&packs_dir)
            .expect("packs dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "pack"))
            })
            .count()
    };
    let limit = cairn_restore::workspace::MERGE_AFTER_SNAPSHOT_PACKS;
    let mut taken = Vec::new();
    let mut most = 0;
    for i in 0..limit + 6 {
        fx.write(&format!("f{}.txt", i % 5), format!("turn {i}").as_bytes());
        let snap = fx.snap();
        taken.push((snap.id, fx.picture()));
        most = most.max(count_packs());
    }
    // Each snapshot wrote a pack: without merging there would be more than the limit.
    assert!(most <= limit, "{most} packs at one point, limit {limit}");
    assert!(count_packs() < limit, "{} packs left", count_packs());
    let verified = fx.ws.store().verify().expect("verify");
    assert!(verified.is_ok(), "{verified:?}");
    for (id, picture) in [&taken[0], &taken[limit / 2], &taken[taken.len() - 1]] {
        fx.ws
            .restore(
                id,
                &PlanOptions::default(),
                &ApplyOptions::default(),
                Context::default(),
            )
            .expect("restore");
        assert_eq!(&fx.picture(), picture);
    }
}

// Issue 56: a staged file is created with its mode, and given it with `fchmod` only where the
// umask took bits away; this checks the bits the usual umask (022) strips, and those `open`
// never sets, come back, beside an existing file and inside a directory made whole.
#[test]
fn files_whose_modes_the_umask_strips_come_back_with_every_bit() {
    let fx = Fx::new();
    let modes: [(&str, u32); 6] = [
        ("group-writable.txt", 0o664),
        ("everyone.txt", 0o666),
        ("tool.sh", 0o777),
        ("private.txt", 0o600),
        ("read-only.txt", 0o444),
        ("setgid.sh", 0o2755),
    ];
    for (name, mode) in modes {
        for dir in ["", "made/"] {
            let rel = format!("{dir}{name}");
            fx.write(&rel, rel.as_bytes());
            chmod(&fx.root().join(&rel), mode);
        }
    }
    fx.write("kept.txt", b"kept");
    let snap = fx.snap();
    let want = fx.picture();
    std::fs::remove_dir_all(fx.root().join("made")).expect("rm");
    for (name, _) in modes {
        std::fs::remove_file(fx.root().join(name)).expect("rm");
    }
    fx.restore(&snap.id);
    assert_eq!(fx.picture(), want);
    assert!(temp_files(&fx.root()).is_empty());
}

// Issue 56: a full restore of a 500k-file tree (41,666 directories) failed with "Too many
// open files": staging held a descriptor for every directory it made. A child process with
// a low limit restores more new directories than it may hold open.
#[test]
fn a_restore_making_more_directories_than_the_process_may_hold_open_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    for i in 0..600 {
        crate::fixtures::write(&root, &format!("many/d{i}/f.txt"), b"f");
    }
    let ws = cairn_restore::Workspace::open(
        &root,
        cairn_restore::WorkspaceOptions {
            store: Some(dir.path().join("store")),
            ..Default::default()
        },
    )
    .expect("open");
    let snap = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot")
        .snapshot
        .id;
    drop(ws);
    let want = crate::fixtures::picture(&root);
    std::fs::remove_dir_all(root.join("many")).expect("rm");
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "behaviour::open_files_child",
            "--include-ignored",
            "--nocapture",
        ])
        .env("CAIRN_FD_DIR", dir.path())
        .env("CAIRN_FD_SNAP", snap.to_hex())
        .output()
        .expect("child");
    assert!(
        out.status.success(),
        "the restore failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(crate::fixtures::picture(&root), want);
}

/// The child: restores with at most 256 open files.
#[test]
#[ignore = "run by a_restore_making_more_directories_than_the_process_may_hold_open_succeeds"]
fn open_files_child() {
    let (Some(dir), Some(snap)) = (
        std::env::var_os("CAIRN_FD_DIR"),
        std::env::var("CAIRN_FD_SNAP").ok(),
    ) else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(256),
            maximum: limit.maximum,
        },
    )
    .expect("setrlimit");
    let ws = cairn_restore::Workspace::open(
        dir.join("root"),
        cairn_restore::WorkspaceOptions {
            store: Some(dir.join("store")),
            ..Default::default()
        },
    )
    .expect("open");
    let snap = cairn_store::SnapshotId::from_hex(&snap).expect("id");
    ws.restore(
        &snap,
        &PlanOptions::default(),
        &ApplyOptions::default(),
        Context::default(),
    )
    .expect("restore");
}
